"""python -m convnet.gpt2 (convnet-gpt2): GPT-2 text generation on the GPU or the numpy reference (the GPT-2
benchmarks are convnet-bench gpt2 / attention / decode / generate).

generate prints only the continuation: for one prompt as it comes (text where the checkpoint has a
tokenizer, else token ids separated by spaces); for several, each when it ends; --json writes ids, text and
rates. Every user error ends in one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ..cmdline import OneLineParser
from ..errors import UsageError, exit_code
from ..outputs import check_output, write_output

PROG = "python -m convnet.gpt2"


def _prog() -> str:
    """The name the user typed: the console script's, else the module's."""
    name = Path(sys.argv[0]).name
    return name if name.startswith("convnet-gpt2") else PROG


def _token_list(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated token ids, got {text!r}") from None


def _version() -> str:
    from .. import __version__
    return f"convnet-gpt2 {__version__}"


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=_prog(), description="GPT-2 text generation on hand-written CUDA kernels (or numpy).")
    p.add_argument("--version", action="version", version=_version())
    commands = p.add_subparsers(dest="command", required=True)
    g = commands.add_parser(
        "generate", help="continue prompts, streaming the new text to stdout",
        description="Continue prompts with GPT-2 on the GPU (or numpy). Prompts are numbered in the order "
                    "--prompt, --prompts-file lines, --tokens; each gets --num-samples continuations, run as one "
                    "batch. Sampling (temperature, top-k, top-p, repetition penalty) runs on the device; the same "
                    "--seed gives the same text on the same GPU and variant.")
    g.add_argument("--checkpoint", required=True,
                   help="a Hugging Face GPT-2 directory, an llm.c float32 .bin file (its tokenizer, if any, is "
                        "looked for in the same directory), or a hub name (gpt2, openai-community/gpt2-medium, "
                        "user/model) read from the Hugging Face cache, downloaded with huggingface_hub when "
                        "online")
    g.add_argument("--prompt", action="append", default=[],
                   help="text to continue (repeat for several; '-' reads one from stdin); needs a tokenizer "
                        "beside the checkpoint (tokenizer.json, or vocab.json + merges.txt)")
    g.add_argument("--tokens", type=_token_list, action="append", default=[],
                   help="token ids to continue, e.g. 464,3290,318 (repeat for several)")
    g.add_argument("--prompts-file", metavar="FILE", help="one prompt per line ('-': stdin); empty lines skipped")
    g.add_argument("--num-samples", type=int, default=1, help="continuations per prompt (default 1)")
    g.add_argument("--variant", default="auto",
                   help="'auto' (default: the fastest GPU variant this GPU runs, else cpu), 'cpu' (numpy) or a "
                        "GPU variant of --model gpt2 --list")
    g.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate at most (default 32)")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (the default)")
    g.add_argument("--top-k", type=int, default=None, help="sample only among the k likeliest tokens")
    g.add_argument("--top-p", type=float, default=None, help="sample only from the nucleus of this mass, in (0, 1]")
    g.add_argument("--repetition-penalty", type=float, default=1.0,
                   help="divide (multiply, if negative) the logits of tokens already in the sequence (default 1: none)")
    g.add_argument("--seed", type=int, default=0, help="sampling seed >= 0 (default 0): same seed, same text")
    g.add_argument("--eos-id", type=int, default=None,
                   help="end-of-text token (default: generation_config.json / config.json's eos_token_id)")
    g.add_argument("--ignore-eos", action="store_true", help="do not stop at the end-of-text token")
    g.add_argument("--stop", action="append", default=[], metavar="STRING",
                   help="stop a sequence when its text contains STRING (repeatable; not shown)")
    g.add_argument("--json", metavar="PATH", help="write prompts, ids, text, finish reasons and tokens/s ('-': stdout)")
    return p


def _check_args(args):
    """Everything about the options alone, before any file is read."""
    from .generate import Sampling
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    if args.num_samples < 1:
        raise UsageError(f"--num-samples must be at least 1, got {args.num_samples}")
    if args.eos_id is not None and args.ignore_eos:
        raise UsageError("--eos-id and --ignore-eos contradict each other")
    if any(x == "" for x in args.stop):
        raise UsageError("--stop takes a non-empty string")
    for flag, value in (("--top-k", args.top_k), ("--top-p", args.top_p)):
        if value is not None and args.temperature == 0:
            raise UsageError(f"{flag} applies to sampling; --temperature 0 (the default) is greedy: "
                             "give --temperature > 0")
    if args.top_p is not None and not (math.isfinite(args.top_p) and 0 < args.top_p <= 1):
        raise UsageError(f"--top-p must lie in (0, 1], got {args.top_p}")
    try:
        s = Sampling(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed).checked()
    except UsageError as e:
        raise UsageError(str(e).replace("top_k", "--top-k").replace("repetition_penalty", "--repetition-penalty")
                         .replace("temperature must", "--temperature must")
                         .replace("seed", "--seed")) from None
    if args.json:
        check_output(args.json, "--json", (args.checkpoint, args.prompts_file), (args.checkpoint,))
    if not (args.prompt or args.tokens or args.prompts_file):
        raise UsageError("give a prompt: --prompt TEXT, --tokens IDS or --prompts-file FILE")
    if args.prompt.count("-") + (args.prompts_file == "-") > 1:
        raise UsageError("stdin ('-') can be read once")
    return s


def _prompt_texts(args) -> list[str]:
    texts = [sys.stdin.read() if p == "-" else p for p in args.prompt]
    if args.prompts_file:
        try:
            lines = (sys.stdin.read() if args.prompts_file == "-" else Path(args.prompts_file).read_text()).splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--prompts-file {args.prompts_file}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
        texts += [line for line in lines if line.strip()]
        if not texts and not args.tokens:
            raise UsageError(f"--prompts-file {args.prompts_file}: no prompts in it")
    if any(t == "" for t in texts):
        raise UsageError("a prompt is empty")
    return texts


def _backend(variant, params, config):
    """backend(prompts, n, sampling, eos_id, rows, on_step) on the numpy reference or the GPU; device name."""
    import functools
    import platform
    if not variant.needs_gpu:
        from .generate import generate_batch
        return functools.partial(generate_batch, params, config), f"CPU ({platform.machine()}, numpy)"
    from .gpu_generate import GPUGenerator, kernel_limits
    why = kernel_limits(config)
    if why is not None:
        raise UsageError(f"this model's {why}; run it with --variant cpu")
    from .gpu import GPT2GPU
    gen = GPUGenerator(GPT2GPU(params, config, variant))
    return gen.run, gen.gpu.rt.name


def _generate(args) -> int:
    from ..runner import resolve_variant
    from .checkpoint import eos_token_id, load_checkpoint, resolve_checkpoint
    from .generate import load_tokenizer, run_generation
    sampling = _check_args(args)
    texts = _prompt_texts(args)
    path = resolve_checkpoint(args.checkpoint)
    if args.json:                                   # a hub name is a folder of the cache now: not written into
        check_output(args.json, "--json", (path,), (path,) if path.is_dir() else ())
    params, config = load_checkpoint(path)
    tokenizer = load_tokenizer(path if path.is_dir() else path.parent)
    if texts and tokenizer is None:
        raise UsageError(f"{path}: no tokenizer (tokenizer.json, or vocab.json + merges.txt) "
                         "to encode --prompt; pass token ids with --tokens")
    prompts = [tokenizer.encode(t) for t in texts] + [list(t) for t in args.tokens]
    for i, p in enumerate(prompts):
        if not p:
            raise UsageError(f"prompt {i + 1} encodes to no tokens")
        bad = [t for t in p if not 0 <= t < config.vocab_size]
        if bad:
            raise UsageError(f"token id {bad[0]} is out of range: the model's vocabulary is 0..{config.vocab_size - 1}")
        if len(p) + args.max_new_tokens > config.n_ctx:
            raise UsageError(f"prompt {i + 1} has {len(p)} tokens: with --max-new-tokens {args.max_new_tokens} "
                             f"that exceeds the model's context of {config.n_ctx}")
    eos = None if args.ignore_eos else (args.eos_id if args.eos_id is not None else eos_token_id(path, config))
    if eos is not None and not 0 <= eos < config.vocab_size:
        raise UsageError(f"--eos-id {eos} is out of range: the model's vocabulary is 0..{config.vocab_size - 1}")
    variant = resolve_variant(args.variant, "gpt2")
    backend, device = _backend(variant, params, config)
    to_stdout = args.json != "-"
    several = len(prompts) * args.num_samples > 1

    def on_text(text):
        sys.stdout.write(text)
        sys.stdout.flush()

    def on_done(c):
        if several:
            shown = c.text if c.text is not None else " ".join(map(str, c.ids))
            print(f"=== prompt {c.prompt_index + 1}, sample {c.sample + 1} ({c.finish_reason}) ===\n{shown}",
                  flush=True)

    completions, stats = run_generation(backend, prompts, args.max_new_tokens, sampling, eos, args.num_samples,
                                        args.stop, tokenizer, on_text if to_stdout else None,
                                        on_done if to_stdout else None)
    if to_stdout and not several:
        print()
    if args.json:
        from .. import __version__
        doc = {"version": __version__, "variant": variant.name, "device": device, "checkpoint": str(path),
               "sampling": {"temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p,
                            "repetition_penalty": sampling.repetition_penalty, "seed": sampling.seed},
               "eos_id": eos, "max_new_tokens": args.max_new_tokens, **stats,
               "completions": [{"prompt_index": c.prompt_index, "sample": c.sample, "prompt_ids": c.prompt_ids,
                                "ids": c.ids, "text": c.text, "finish_reason": c.finish_reason}
                               for c in completions]}
        write_output(args.json, json.dumps(doc, indent=1))
    return 0


COMMANDS = {"generate": _generate}
MOVED = ("bench-attention", "bench-decode", "bench-generate")      # the instruments' command has them: convnet-bench


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in MOVED:
        what = argv[0].removeprefix("bench-")
        print(f"{_prog()}: error: {argv[0]} is a measurement: run convnet-bench {what} (see convnet-bench {what} "
              "--help)", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    return exit_code(_prog(), COMMANDS[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
