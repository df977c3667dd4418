"""SASS of every build of the named variants (124M and the small test shapes), HEAD's kernels (/tmp/oldk) against the
working tree's, function by function (a function only the new source has is listed as new): session 22's script with
the builds' kernel file in each row, and FILES=a.cu,b.cu to compare only those."""
import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from convnet import catalogue
from convnet.bench.dryrun import kernels_of
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.model import GPT2Config, random_params
from convnet.gpu import build

OBJ = "/tmp/nvd/x/nvidia/cu13/bin/cuobjdump"
cfgs = [GPT2Config(1, 12, 768, 50257, 1024), GPT2Config(2, 2, 128, 257, 192)]
files = [f for f in os.environ.get("FILES", "").split(",") if f]
builds = set()
for name in sys.argv[1:]:
    for cfg in cfgs:
        builds |= kernels_of(lambda rt: GPT2GPU(random_params(cfg), cfg, catalogue.get(name, "gpt2"), rt))
builds = sorted(b for b in builds if not files or b[0] in files)
print(len(builds), "builds", flush=True)


def sass(kdir, f, d, tag):
    out = f"/tmp/sass/{tag}-{hashlib.md5((f + repr(d)).encode()).hexdigest()}.cubin"
    cmd = [build.nvcc_path(), "-cubin", "-arch=sm_90a", *build.BASE_FLAGS, *build.define_flags(dict(d)), "-I", kdir,
           "-o", out, f"{kdir}/{f}"]
    subprocess.run(cmd, check=True, capture_output=True)
    funcs, name = {}, None
    for ln in subprocess.run([OBJ, "-sass", out], capture_output=True, text=True).stdout.splitlines():
        if "Function :" in ln:
            name = ln.split("Function :")[1].strip()
        elif name and ln.strip() and "code for" not in ln:
            funcs.setdefault(name, []).append(ln)
    return funcs


def cmp(fd):
    f, d = fd
    a, b = sass("/tmp/oldk", f, d, "old"), sass("/work/main/kernels", f, d, "new")
    keys = ("BF_OUT", "BF_PP", "BF_BN", "BF_LNS", "BF_GROUP", "BF_EPI_TMA", "LN_VEC", "EMB_VEC", "PDL")
    diff = sorted(n for n in a if a[n] != b.get(n))
    return (f, {k: v for k, v in d if k in keys}, f"{len(a) - len(diff)}/{len(a)} functions same",
            "different: " + ",".join(diff) if diff else "", "new: " + ",".join(sorted(set(b) - set(a))))


os.makedirs("/tmp/sass", exist_ok=True)
with ThreadPoolExecutor(2) as ex:
    for r in ex.map(cmp, builds):
        print(*r, flush=True)
