"""python -m convnet.gpt2 generate: continue a prompt with the numpy GPT-2 reference.

Prints only the continuation, as it comes: text where the checkpoint has a tokenizer, else
token ids separated by spaces. Every user error ends in one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UsageError, exit_code
from .checkpoint import load_hf, load_llmc
from .generate import generate, load_tokenizer

PROG = "python -m convnet.gpt2"


class _Parser(argparse.ArgumentParser):
    def error(self, message):          # one line, exit 2, instead of usage + message
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _token_list(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated token ids, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="GPT-2 on the numpy reference.")
    commands = p.add_subparsers(dest="command", required=True)
    g = commands.add_parser("generate", help="continue a prompt, streaming the new tokens to stdout")
    g.add_argument("--checkpoint", required=True,
                   help="a Hugging Face GPT-2 directory, or an llm.c float32 .bin file "
                        "(its tokenizer, if any, is looked for in the same directory)")
    prompt = g.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="text to continue; needs a tokenizer beside the checkpoint "
                                         "(tokenizer.json, or vocab.json + merges.txt)")
    prompt.add_argument("--tokens", type=_token_list, help="token ids to continue, e.g. 464,3290,318")
    g.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate (default 32)")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (the default)")
    g.add_argument("--top-k", type=int, default=None, help="sample only among the k likeliest tokens")
    g.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    a = commands.add_parser("bench-attention", help="time causal attention alone on the GPU: flash, naive, "
                                                    "PyTorch SDPA (when importable)")
    for name, default in (("--batch", 8), ("--heads", 12), ("--seq", 1024), ("--head-size", 64)):
        a.add_argument(name, type=int, default=default, help=f"(default {default})")
    d = commands.add_parser("bench-decode", help="greedy decode rate (B=1, random 124M weights) of variants, "
                                                 "or of one variant under swept -D constants / params")
    d.add_argument("--variants", nargs="+", default=["fast_fp32", "fast_mma", "fast"])
    d.add_argument("--sweep", nargs="*", default=[], metavar="KEY=V1,V2",
                   help="upper-case keys are -D constants, lower-case ones variant params")
    d.add_argument("--new-tokens", type=int, default=256, help="(default 256)")
    d.add_argument("--repeat", type=int, default=5, help="runs per setting; the median rate (default 5)")
    return p


class _TextStream:
    """Writes the decoded continuation as tokens come, holding back a multi-byte character
    until its last byte has arrived (byte-level BPE tokens can split one)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.ids, self.written = tokenizer, [], 0

    def __call__(self, token: int):
        self.ids.append(token)
        self.flush(final=False)

    def flush(self, final: bool):
        text = self.tokenizer.decode(self.ids)
        if final or not text.endswith("\ufffd"):
            sys.stdout.write(text[self.written:])
            sys.stdout.flush()
            self.written = len(text)


def _print_id(token: int):
    print(token, end=" ", flush=True)


def _generate(args) -> int:
    path = Path(args.checkpoint)
    params, config = load_hf(path) if path.is_dir() else load_llmc(path)
    tokenizer = load_tokenizer(path if path.is_dir() else path.parent)
    if args.prompt is not None:
        if tokenizer is None:
            raise UsageError(f"{path}: no tokenizer (tokenizer.json, or vocab.json + merges.txt) "
                             "to encode --prompt; pass token ids with --tokens")
        prompt_ids = tokenizer.encode(args.prompt)
    else:
        prompt_ids = args.tokens
    stream = _TextStream(tokenizer) if tokenizer is not None else None
    generate(params, config, prompt_ids, args.max_new_tokens, args.temperature, args.top_k,
             args.seed, on_token=_print_id if stream is None else stream)
    if stream is not None:
        stream.flush(final=True)
    print()
    return 0


def _bench_attention(args) -> int:
    from ..bench.gpt2 import attention_benchmark
    if min(args.batch, args.heads, args.seq, args.head_size) < 1 or args.head_size % 16:
        raise UsageError("sizes must be positive and --head-size a multiple of 16")
    print(attention_benchmark(args.batch, args.heads, args.seq, args.head_size))
    return 0


def _bench_decode(args) -> int:
    from ..bench.gpt2 import decode_benchmark
    if args.new_tokens < 2 or args.repeat < 1:
        raise UsageError("--new-tokens must be at least 2 and --repeat at least 1")
    print(decode_benchmark(args.variants, args.sweep, args.new_tokens, args.repeat))
    return 0


COMMANDS = {"generate": _generate, "bench-attention": _bench_attention, "bench-decode": _bench_decode}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    command = COMMANDS[args.command]
    return exit_code(PROG, command, args)


if __name__ == "__main__":
    sys.exit(main())
