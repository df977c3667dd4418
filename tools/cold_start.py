"""Wall times of the commands a user runs first, each from an empty kernel cache, as a table (issue 41's targets):
the main job cold and warm, `convnet-gpt2 generate` with every current GPT-2 GPU variant on a 124M-shaped checkpoint,
and fast_bf16 on gpt2-medium's shape; with the number of builds each run had to compile (0 where the package's
prebuilt kernels served it). Run on the GPU machine with the package installed (the console scripts on PATH):

    python tools/cold_start.py [--variants fast_bf16,fast] [--skip-main]

Random-weight checkpoints of the GPT-2 shapes are written with transformers into a temporary folder (the figures do
not depend on the weights)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def checkpoint(folder: Path, n_layer: int, n_head: int, n_embd: int) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    if not (folder / "model.safetensors").is_file():
        torch.manual_seed(0)
        config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=50257, n_positions=1024,
                            bos_token_id=50256, eos_token_id=50256)
        GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    return folder


def timed(cmd: list, cache: Path) -> tuple[float, int, int, str]:
    """(wall s, exit status, builds compiled into the cache, last line of stderr) of one command."""
    env = {**os.environ, "CONVNET_CACHE": str(cache)}
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    compiled = len(list((cache / "cubin").glob("*.cubin"))) if (cache / "cubin").is_dir() else 0
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    return wall, p.returncode, compiled, (err[-1] if err else "")[:110]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=None, help="GPT-2 variants (default: every current GPU variant)")
    ap.add_argument("--skip-main", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from convnet import catalogue
    variants = args.variants.split(",") if args.variants else \
        [n for n, v in catalogue.load_all("gpt2").items() if v.needs_gpu]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if not args.skip_main:
            main_cache = tmp / "main"
            for label in ("empty cache", "warm", "warm"):
                wall, rc, compiled, err = timed(["convnet", "--batch", "10000"], main_cache)
                rows.append(("convnet --batch 10000", label, wall, rc, compiled, err))
        small = checkpoint(tmp / "gpt2-124M", 12, 12, 768)
        gen = ["convnet-gpt2", "generate", "--tokens", "1,2,3", "--max-new-tokens", "16", "--checkpoint"]
        for name in variants:
            wall, rc, compiled, err = timed([*gen, str(small), "--variant", name], tmp / f"c-{name}")
            rows.append((f"generate 124M {name}", "empty cache", wall, rc, compiled, err))
        medium = checkpoint(tmp / "gpt2-medium", 24, 16, 1024)
        for label in ("empty cache", "warm"):
            wall, rc, compiled, err = timed([*gen, str(medium), "--variant", "fast_bf16"], tmp / "c-medium")
            rows.append(("generate medium fast_bf16", label, wall, rc, compiled, err))
    print(f"{'command':34s} {'cache':12s} {'wall s':>7s} {'exit':>4s} {'compiled':>8s}  last stderr line")
    for what, label, wall, rc, compiled, err in rows:
        print(f"{what:34s} {label:12s} {wall:7.2f} {rc:4d} {compiled:8d}  {err}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r[3] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
