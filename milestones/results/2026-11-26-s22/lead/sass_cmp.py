"""SASS of every build of the named variants (124M and the small test shapes), HEAD's kernels vs the working tree's."""
import sys, subprocess, hashlib, os
from concurrent.futures import ThreadPoolExecutor
from convnet import catalogue
from convnet.bench.dryrun import kernels_of
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.model import GPT2Config, random_params
from convnet.gpu import build
OBJ = "/tmp/nvd/x/nvidia/cu13/bin/cuobjdump"
cfgs = [GPT2Config(1, 12, 768, 50257, 1024), GPT2Config(2, 2, 128, 257, 192)]
builds = set()
for name in sys.argv[1:]:
    for cfg in cfgs:
        builds |= kernels_of(lambda rt: GPT2GPU(random_params(cfg), cfg, catalogue.get(name, "gpt2"), rt))
print(len(builds), "builds")
def sass(kdir, f, d, tag):
    out = f"/tmp/sass/{tag}-{hashlib.md5((f + repr(d)).encode()).hexdigest()}.cubin"
    cmd = [build.nvcc_path(), "-cubin", "-arch=sm_90a", *build.BASE_FLAGS, *build.define_flags(dict(d)), "-I", kdir, "-o", out, f"{kdir}/{f}"]
    subprocess.run(cmd, check=True, capture_output=True)
    s = subprocess.run([OBJ, "-sass", out], capture_output=True, text=True).stdout
    return "\n".join(l for l in s.splitlines() if "code for" not in l and "Function" not in l and l.strip())
os.makedirs("/tmp/sass", exist_ok=True)
def cmp(fd):
    f, d = fd
    a, b = sass("/tmp/oldk", f, d, "old"), sass("/work/main/kernels", f, d, "new")
    lns = dict(d).get("BF_LNS", 0)
    return (f, lns, {k: v for k, v in d if k in ("BF_OUT", "BF_PP", "BF_BN", "BF_LNS", "BF_GROUP", "BF_EPI_TMA")}, a == b, len(a.splitlines()), len(b.splitlines()))
with ThreadPoolExecutor(4) as ex:
    for r in ex.map(cmp, sorted(builds)):
        print(r)
