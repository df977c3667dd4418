"""flash_attention_bf16's SASS (sm_90a and sm_80) for FB_LEAN 0 / 1 against HEAD's kernels (/tmp/kh/kernels):
instruction counts, and whether FB_LEAN=0 builds HEAD's code exactly. Session 25."""
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from convnet.gpu import build

OBJ = "/tmp/nvd/x/nvidia/cu13/bin/cuobjdump"
BASE = {"USE_RESTRICT": 1}
CFGS = {"4w1s": dict(FB_WARPS=4, FB_MT=1, FB_QS=0), "4w2s": dict(FB_WARPS=4, FB_MT=2, FB_QS=1),
        "4w2s3st": dict(FB_WARPS=4, FB_MT=2, FB_QS=1, FB_STAGES=3), "8w1s128": dict(FB_WARPS=8, FB_MT=1, FB_BC=128),
        "2w2s3st": dict(FB_WARPS=2, FB_MT=2, FB_QS=1, FB_STAGES=3), "d48": dict(HEAD_DIM=48, FB_WARPS=4, FB_MT=2),
        "d96": dict(HEAD_DIM=96, FB_WARPS=4, FB_MT=1), "d128": dict(HEAD_DIM=128, FB_WARPS=4, FB_MT=1, FB_QS=1)}
ARCHS = sys.argv[1:] or ["sm_90a"]


def sass(kdir, d, arch, tag):
    out = f"/tmp/fbsass/{tag}.cubin"
    cmd = [build.nvcc_path(), "-cubin", f"-arch={arch}", *build.BASE_FLAGS, *build.define_flags(d), "-I", kdir,
           "-o", out, f"{kdir}/attention.cu"]
    subprocess.run(cmd, check=True, capture_output=True)
    txt = subprocess.run([OBJ, "-sass", "-fun", "flash_attention_bf16", out], capture_output=True, text=True).stdout
    return re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(.*?;)", txt, re.M)


def one(job):
    name, d, arch = job
    d = {**BASE, **d}
    old = sass("/tmp/kh/kernels", d, arch, f"{name}-{arch}-head")
    lean0 = sass("kernels", {**d, "FB_LEAN": 0}, arch, f"{name}-{arch}-l0")
    lean1 = sass("kernels", {**d, "FB_LEAN": 1}, arch, f"{name}-{arch}-l1")
    return f"{name:8} {arch:7} HEAD {len(old):5}  FB_LEAN=0 {len(lean0):5} ({'same' if lean0 == old else 'DIFFERENT'})" \
           f"  FB_LEAN=1 {len(lean1):5}"


if __name__ == "__main__":
    import os
    os.makedirs("/tmp/fbsass", exist_ok=True)
    with ThreadPoolExecutor(2) as ex:
        for line in ex.map(one, [(n, d, a) for a in ARCHS for n, d in CFGS.items() if a == "sm_90a" or d.get("HEAD_DIM", 64) <= 64]):
            print(line, flush=True)
