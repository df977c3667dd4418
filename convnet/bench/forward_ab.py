"""Compares GPT-2 variants' forward pass (B=8, T=1024, 124M shape, random weights) in one process, in interleaved
rounds (variant order forward, reversed, forward, ...), so that a drift of the GPU's clocks or of the host during the
run falls on every variant alike:

    python -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s12 --rounds 4 --repeat 10

Each round builds each variant afresh (one GPT2GPU at a time: they share the buffer pool) and times `repeat`
forwards with CUDA events after a warm-up (GPT2GPU.time_forward): "forward" as a user's call runs it (the host
launching while the GPU works), and "queued" with the whole forward enqueued behind a spin kernel first (the GPU's
own time, without the host's launch gaps). The table gives the median over rounds of each, every round's queued
figure, and the ratio to the first variant. Session 14: run_milestone --compare's one pass per variant per process
moved the same variant by up to 1.1 ms between two processes (H100), more than the changes measured."""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np
from tqdm import tqdm

from .. import catalogue, report
from ..cmdline import positive_int
from ..errors import exit_code


def round_orders(names: list, rounds: int) -> list:
    """The variant order of each round: as given, reversed, as given, ..."""
    return [list(names) if r % 2 == 0 else list(reversed(names)) for r in range(rounds)]


def summarize(names: list, timings: dict) -> list:
    """timings {name: [(forward_ms, queued_ms) per round]} -> table rows: name, median forward, median queued,
    queued per round, median queued relative to the first variant's."""
    med = {n: (statistics.median(f for f, _ in timings[n]), statistics.median(q for _, q in timings[n])) for n in names}
    first = med[names[0]][1]
    return [[n, med[n][0], med[n][1], " / ".join(f"{q:.3f}" for _, q in timings[n]), f"{first / med[n][1]:.3f}x"]
            for n in names]


def random_124m(B: int, T: int) -> tuple:
    """(config, params, idx): GPT-2 124M's shape with random weights and a B x T batch of random tokens, as the
    forward benchmarks (this one, convnet.bench.gemm_groups) time it."""
    from ..gpt2.model import GPT2Config, random_params
    config = GPT2Config(12, 12, 768, 50257, 1024)
    return config, random_params(config), np.random.default_rng(1).integers(0, config.vocab_size, (B, T))


def run(names: list, rounds: int = 4, repeat: int = 10, B: int = 8, T: int = 1024) -> str:
    from ..gpt2.gpu import GPT2GPU
    variants = {n: catalogue.get(n, "gpt2") for n in names}
    config, params, idx = random_124m(B, T)
    timings = {n: [] for n in names}
    device = ""
    runs = [n for order in round_orders(names, rounds) for n in order]
    for n in tqdm(runs, desc="forward A/B", unit="run"):
        gpu = GPT2GPU(params, config, variants[n])
        t = gpu.time_forward(idx, repeat=repeat, queued=True)
        timings[n].append((t["total_ms"], t["queued_ms"]))
        device = gpu.rt.name
        del gpu
    headers = ["variant", "forward (ms, median of rounds)", "queued (ms)", "queued per round (ms)",
               f"queued: {names[0]} / variant"]
    return report.table(headers, summarize(names, timings),
                        title=f"GPT-2 124M (random weights) B={B} T={T} on {device}: {rounds} rounds x {repeat} "
                              "timed forwards per variant, orders alternating")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m convnet.bench.forward_ab", description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", required=True)
    p.add_argument("--rounds", type=positive_int, default=4)
    p.add_argument("--repeat", type=positive_int, default=10)
    args = p.parse_args(argv)

    def go():
        for n in args.variants:
            catalogue.get(n, "gpt2")                 # an unknown name fails here, in one line, before any GPU work
        print(run(args.variants, args.rounds, args.repeat))
        return 0
    return exit_code(p.prog, go)


if __name__ == "__main__":
    sys.exit(main())
