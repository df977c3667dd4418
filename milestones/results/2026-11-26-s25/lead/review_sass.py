"""Session 25 review: flash_attention_bf16 / flash_attention_bf16_wg SASS, HEAD's kernels (/tmp/kh2, git archive) against the
tree's, FB_LEAN / FW_LEAN 0 and 1, sm_90a (and FB on sm_80: edit -arch). Run for the mask_and_max commit: all 37 builds
the same, instruction for instruction."""
import re, subprocess, sys, os
from concurrent.futures import ThreadPoolExecutor
from convnet.gpu import build
OBJ = "/tmp/nvd/x/nvidia/cu13/bin/cuobjdump"
os.makedirs("/tmp/ss", exist_ok=True)
FB = {"4w1s": dict(FB_WARPS=4, FB_MT=1, FB_QS=0), "4w2s": dict(FB_WARPS=4, FB_MT=2, FB_QS=1),
      "4w2s3st": dict(FB_WARPS=4, FB_MT=2, FB_QS=1, FB_STAGES=3), "8w1s128": dict(FB_WARPS=8, FB_MT=1, FB_BC=128),
      "d48": dict(HEAD_DIM=48, FB_WARPS=4, FB_MT=2, FB_QS=1), "d96": dict(HEAD_DIM=96, FB_WARPS=4, FB_MT=1),
      "d128pdl": dict(HEAD_DIM=128, FB_WARPS=4, FB_MT=1, FB_QS=1, FB_PDL=1)}
FW = {"bc64": {}, "bc128": {"FW_BC": 128, "FW_MIN_BLOCKS": 1}, "3stages": {"FW_STAGES": 3}, "1wg": {"FW_WG": 1},
      "3wg_pdl": {"FW_WG": 3, "FW_MIN_BLOCKS": 1, "FB_PDL": 1}, "pipe": {"FW_PIPE": 1},
      "pipe_bc128": {"FW_PIPE": 1, "FW_BC": 128, "FW_MIN_BLOCKS": 1}, "pipe_1wg": {"FW_PIPE": 1, "FW_WG": 1, "FW_MIN_BLOCKS": 4}}
jobs = []
for lean in (0, 1):
    for n, d in FB.items():
        jobs.append((f"fb-{n}-{lean}", {"HEAD_DIM": 64, **d, "FB_LEAN": lean}, "flash_attention_bf16"))
    for n, d in FW.items():
        jobs.append((f"fw-{n}-{lean}", {"HEAD_DIM": 64, "FB_WARPS": 4, "FB_MT": 2, "FB_QS": 1, **d, "FW_LEAN": lean},
                     "flash_attention_bf16_wg"))
def sass(kdir, d, fn, tag):
    out = f"/tmp/ss/{tag}.cubin"
    subprocess.run([build.nvcc_path(), "-cubin", "-arch=sm_90a", *build.BASE_FLAGS, *build.define_flags({"USE_RESTRICT": 1, **d}),
                    "-I", kdir, "-o", out, f"{kdir}/attention.cu"], check=True, capture_output=True)
    txt = subprocess.run([OBJ, "-sass", "-fun", fn, out], capture_output=True, text=True).stdout
    return re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(.*?;)", txt, re.M)
def one(job):
    tag, d, fn = job
    a, b = sass("/tmp/kh2/kernels", d, fn, tag + "-old"), sass("kernels", d, fn, tag + "-new")
    return f"{tag:22} {len(a):5} {len(b):5} {'same' if a == b else 'DIFFERENT'}"
with ThreadPoolExecutor(2) as ex:
    for line in ex.map(one, jobs):
        print(line, flush=True)
