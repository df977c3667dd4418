"""The fp32 / TF32 flash kernels' SASS (sm_90a) for bench-attention's FLASH_BENCH builds and the test tiles at head
sizes 64 and 80, HEAD's kernels (/tmp/kh/kernels) against the tree's: instruction counts per kernel. Session 25."""
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

from convnet.bench.dryrun import RecordingRuntime
from convnet.bench.gpt2 import FLASH_BENCH
from convnet.gpt2.flash import FlashAttention
from convnet.gpu import build

OBJ = "/tmp/nvd/x/nvidia/cu13/bin/cuobjdump"


def sass(kdir, d, fn, tag):
    out = f"/tmp/fasass/{tag}.cubin"
    cmd = [build.nvcc_path(), "-cubin", "-arch=sm_90a", *build.BASE_FLAGS, *build.define_flags(d), "-I", kdir,
           "-o", out, f"{kdir}/attention.cu"]
    subprocess.run(cmd, check=True, capture_output=True)
    txt = subprocess.run([OBJ, "-sass", "-fun", fn, out], capture_output=True, text=True).stdout
    return re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(.*?;)", txt, re.M)


def one(job):
    i, (f, fn, d) = job
    old, new = sass("/tmp/kh/kernels", dict(d), fn, f"{i}-old"), sass("kernels", dict(d), fn, f"{i}-new")
    keys = {k: v for k, v in d if k in ("HEAD_DIM", "FA_RT", "FA_TY", "FA_BC", "FA_KV_BUFS", "FT_KV_BUFS", "FT_WARPS",
                                        "FT_SPLIT")}
    return f"{fn:22} {keys}  HEAD {len(old)}  now {len(new)} ({'same' if old == new else 'different'})"


if __name__ == "__main__":
    import os
    os.makedirs("/tmp/fasass", exist_ok=True)
    rt = RecordingRuntime()
    rt.arch = "sm_90a"
    for D in (64, 80):
        for cfg in FLASH_BENCH.values():
            FlashAttention(rt, D, {}, "bench", **cfg)
    jobs = [(f, "flash_attention_tf32" if any(k.startswith("FT_") for k, _ in d) else "flash_attention", d)
            for f, d in sorted(rt.builds)]
    with ThreadPoolExecutor(2) as ex:
        for line in ex.map(one, enumerate(jobs)):
            print(line, flush=True)
