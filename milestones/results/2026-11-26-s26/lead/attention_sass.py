"""Session 26: attention.cu's whole SASS (every function), HEAD's kernels (/tmp/kh2, git archive) against the tree's,
at head sizes 16..128 on sm_90a and sm_80 (default tile constants): the bf16 mma.sync kernel's #if guard and
decode_attention's DA_PARTS formula must change no build that compiled before."""
import re, subprocess, os
from concurrent.futures import ThreadPoolExecutor
from convnet.gpu import build
OBJ = "/tmp/nvd/x/nvidia/cu13/bin/cuobjdump"
os.makedirs("/tmp/ss", exist_ok=True)
jobs = [(D, arch) for D in range(16, 129, 16) for arch in ("sm_90a", "sm_80")]
def sass(kdir, D, arch, tag):
    out = f"/tmp/ss/{tag}.cubin"
    subprocess.run([build.nvcc_path(), "-cubin", f"-arch={arch}", *build.BASE_FLAGS,
                    *build.define_flags({"USE_RESTRICT": 1, "HEAD_DIM": D}), "-I", kdir, "-o", out, f"{kdir}/attention.cu"],
                   check=True, capture_output=True)
    txt = subprocess.run([OBJ, "-sass", out], capture_output=True, text=True).stdout
    return re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(.*?;)", txt, re.M), re.findall(r"Function : (\S+)", txt)
def one(job):
    D, arch = job
    (a, fa), (b, fb) = sass("/tmp/kh2/kernels", D, arch, f"{D}{arch}-old"), sass("kernels", D, arch, f"{D}{arch}-new")
    return f"D={D:3} {arch:6} functions {len(fa):2}/{len(fb):2} instructions {len(a):6}/{len(b):6} " \
           f"{'same' if (a, fa) == (b, fb) else 'DIFFERENT'}"
with ThreadPoolExecutor(2) as ex:
    for line in ex.map(one, jobs):
        print(line, flush=True)
