"""How fast convnet-predict classifies a folder of PNG files, stage by stage (issue 13's goal: >= 5,000 PNGs/s
for a folder of 1,000 on the 16-core GPU machine, decode + preprocessing + GPU).

Writes N PNGs of the Fashion-MNIST test split into a temporary folder, then times, each the median of
--repeat runs after a warm-up: decoding (the process pool), the host's 28 -> 86 preprocessing (what the cpu
path and variants that upload 86 x 86 images need; the default GPU variant resizes inside conv1), the network
alone, the whole in-process pipeline (predict.run: pool start, decode, preprocess, network, overlapped per
chunk), and once the command itself in a fresh process (interpreter, imports, CUDA context, kernel load).

    python -m convnet.bench.predict_speed --n 1000 --variant auto

Measured on an NVIDIA H100 (16 cores, 2026-11-23), 1,000 PNGs, tc_fused: decode 36.7 ms (16 workers), network
2.2 ms (the 28 -> 86 resize inside conv1; on the host it would cost 47.8 ms), in-process pipeline 124 ms
(8,054 PNGs/s, pool start included), the command in a fresh process 1.42 s (707/s: interpreter, imports,
CUDA context). 10,000 PNGs: pipeline 439 ms (22,793/s), command 2.24 s. cpu variant, 1,000 PNGs: network
951 ms, pipeline 1.70 s (589/s).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import data, predict, report, weights as wio
from ..runner import resolve_variant


def write_pngs(folder: Path, n: int) -> np.ndarray:
    """The first n test images as 28 x 28 grey PNG files; returns their labels."""
    from skimage.io import imsave
    raw = data.load_raw("test")
    if n > len(raw.labels):
        raise SystemExit(f"--n {n}: the test split holds {len(raw.labels)} images")
    for i in range(n):
        imsave(folder / f"{i:05d}.png", raw.images[i], check_contrast=False)
    return raw.labels[:n].astype(np.int64)


def _median_s(fn, repeat: int):
    fn()                                           # warm-up: forks, compiles, allocates
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def measure(n: int, variant_name: str, workers: int, repeat: int, chunk: int = 10000) -> tuple[str, dict]:
    variant = resolve_variant(variant_name)
    weights = wio.load()
    with tempfile.TemporaryDirectory(prefix="convnet-predict-speed-") as tmp:
        folder = Path(tmp)
        labels = write_pngs(folder, n)
        items = predict.collect([str(folder)])
        t0 = time.perf_counter()
        pool = predict.Workers(workers, n)
        (piece,) = list(predict.chunks(items, n))
        predict.gather(predict.submit_decode(pool, piece[:1], False), strict=True)   # forks the workers
        pool_start = time.perf_counter() - t0
        try:
            decode, (_, raw) = _median_s(lambda: predict.gather(predict.submit_decode(pool, piece, False), True),
                                         repeat)
            if not np.array_equal(raw, data.load_raw("test").images[:n]):
                raise SystemExit("decoded PNGs differ from the test split's images")
            upscale, x = _median_s(lambda: predict.upscale(pool, raw), repeat)
            t0 = time.perf_counter()
            net = predict.Network(variant, weights)
            setup = time.perf_counter() - t0
            feed = x if net.host_upscale else None
            network, logits = _median_s(lambda: net.logits(raw, feed), repeat)
        finally:
            pool.shutdown(wait=True)
        pipeline, (res, _) = _median_s(lambda: predict.run(items, variant, weights, workers, chunk), repeat)
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "convnet.predict", str(folder), "--quiet", "--variant", variant.name,
               "--workers", str(workers)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        command = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
    acc = float((logits.argmax(axis=1) == labels).mean())
    predicted = np.concatenate([t[:, 0] for t in res.top])
    if not np.array_equal(predicted, logits.argmax(axis=1)):
        raise SystemExit("the pipeline's classes differ from the network's on the same pictures")
    preprocess = upscale if net.host_upscale else 0.0
    stages = decode + preprocess + network
    figures = {"images": n, "variant": variant.name, "device": net.device, "workers": pool.count,
               "decode_s": decode, "upscale_host_s": upscale, "upscale_on_host": net.host_upscale,
               "network_s": network, "stages_s": stages, "pipeline_s": pipeline, "pool_start_s": pool_start,
               "network_setup_s": setup, "command_s": command, "accuracy": acc}
    rate = lambda s: f"{n / s:,.0f}" if s > 0 else "-"   # noqa: E731
    rows = [["pool start (fork)", f"{pool_start * 1e3:.1f}", "-"],
            ["decode (PNG -> 28x28 uint8)", f"{decode * 1e3:.1f}", rate(decode)],
            ["28->86 on the host" + ("" if net.host_upscale else " (not used: done on the GPU)"),
             f"{upscale * 1e3:.1f}", rate(upscale)],
            [f"network ({variant.name})", f"{network * 1e3:.1f}", rate(network)],
            ["decode + preprocess + network", f"{stages * 1e3:.1f}", rate(stages)],
            ["pipeline in process (predict.run)", f"{pipeline * 1e3:.1f}", rate(pipeline)],
            ["network set-up (first time in process)", f"{setup * 1e3:.1f}", "-"],
            ["the command, fresh process", f"{command * 1e3:.0f}", rate(command)]]
    title = f"convnet-predict on {n} PNGs, {net.device}, {figures['workers']} workers, accuracy {acc:.4f}"
    return report.table(["stage", "ms (median)", "images/s"], rows, title=title), figures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m convnet.bench.predict_speed", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000, help="PNG files (default 1000)")
    p.add_argument("--variant", default="auto")
    p.add_argument("--workers", type=int, default=predict._cpu_count())
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = p.parse_args(argv)
    text, figures = measure(args.n, args.variant, args.workers, args.repeat)
    print(text)
    if args.json:
        report.save_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
