"""Session 26: to_f32(__nv_bfloat16) moved from sampling.cu to common.cuh (which now includes cuda_bf16.h): every
kernel file's SASS, HEAD's kernels (/tmp/kh3, git archive) against the tree's, sm_90a, USE_RESTRICT=1 (HEAD_DIM 64
for attention.cu, LN_VEC 6 for transformer.cu)."""
import os, re, subprocess
from concurrent.futures import ThreadPoolExecutor
from convnet.gpu import build
OBJ = "/tmp/nvd/x/nvidia/cu13/bin/cuobjdump"
os.makedirs("/tmp/ss3", exist_ok=True)
EXTRA = {"attention.cu": {"HEAD_DIM": 64}, "transformer.cu": {"LN_VEC": 6}, "sampling.cu": {"SM_THREADS": 1024}}
files = sorted(f for f in os.listdir("kernels") if f.endswith(".cu"))
def sass(kdir, f, tag):
    out = f"/tmp/ss3/{tag}.cubin"
    subprocess.run([build.nvcc_path(), "-cubin", "-arch=sm_90a", *build.BASE_FLAGS,
                    *build.define_flags({"USE_RESTRICT": 1, **EXTRA.get(f, {})}), "-I", kdir, "-o", out, f"{kdir}/{f}"],
                   check=True, capture_output=True)
    txt = subprocess.run([OBJ, "-sass", out], capture_output=True, text=True).stdout
    return re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(.*?;)", txt, re.M), re.findall(r"Function : (\S+)", txt)
def one(f):
    (a, fa), (b, fb) = sass("/tmp/kh3/kernels", f, f + "-old"), sass("kernels", f, f + "-new")
    return f"{f:18} functions {len(fa):3}/{len(fb):3} instructions {len(a):7}/{len(b):7} {'same' if (a, fa) == (b, fb) else 'DIFFERENT'}"
with ThreadPoolExecutor(2) as ex:
    for line in ex.map(one, files):
        print(line, flush=True)
