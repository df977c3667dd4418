"""Compiles on the CPU machine, into $CONVNET_CACHE, exactly the builds of call.sh (session 11, issue 14), so that the
H100's seconds go to tests and the benchmark:

    CONVNET_CACHE=build/d11cache .venv/bin/python milestones/results/2026-11-23-s11/decode/precompile_call11.py 2 sm_90a

VARIANTS (the bench-generate sweep at the 124M shape), session 10's precompile_call.collect (the _lns GEMM builds,
the batched-decode / token-pair variants DECODE_VARIANTS, the sanitizer's SAN_V11) and test_gpu_generate.py's subset:
fast_fp32 at its configurations (precompile_generate's) and fast_bf16 at the small shape."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "milestones/results/2026-11-23-s10/decode"))

from convnet import catalogue                                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpt2.gpu import GPT2GPU                                 # noqa: E402
from convnet.gpt2.gpu_generate import GPUGenerator, Ragged           # noqa: E402
from convnet.gpt2.model import random_params                         # noqa: E402

os.environ.setdefault("VARIANTS", "fast,fast_pdl_red,fast_pdl_lns_red,fast_bf16")
os.environ.setdefault("DECODE_VARIANTS", "fast_lns,fast_pdl_lns,fast_pdl_lns_red")
os.environ.setdefault("SAN_V11", "fast_pdl_lns_red")
os.environ.setdefault("RED_BUILDS", "0")
GEN_VARIANTS = os.environ.get("GEN_VARIANTS", "fast_fp32,fast_bf16").split(",")


def collect(arch: str) -> set:
    import precompile_call
    import precompile_generate
    builds = set(precompile_call.collect(arch))
    for name in GEN_VARIANTS:
        v = catalogue.get(name, "gpt2")
        configs = precompile_generate.CONFIGS if v.precision != "bf16" else precompile_generate.CONFIGS[:1]
        for config in configs:
            rt = RecordingRuntime()
            gpu = GPT2GPU(random_params(config), config, v, rt)
            GPUGenerator(gpu)
            if gpu.graphable and v.precision != "bf16":
                Ragged(gpu, [1, 2], 2)
            builds |= rt.builds
    rt = RecordingRuntime()
    rt.kernel("sampling.cu", "sample_tokens", {"SM_THREADS": 1024}, "test")
    return builds | rt.builds


def seed(builds: set, arch: str, caches: list) -> int:
    """Copies into $CONVNET_CACHE/cubin the builds' cubins (and logs) already in other cache folders (same key: same
    source, headers, flags, arch and nvcc); returns how many it found."""
    import shutil
    from convnet.gpu import build
    out = build.cubin_dir()
    found = 0
    for f, d in builds:
        source = build.KERNELS_DIR / f
        key = build._key(source, [*build.BASE_FLAGS, *build.define_flags(dict(d))], arch)
        name = f"{source.stem}-{key}"
        if (out / f"{name}.cubin").is_file():
            found += 1
            continue
        for c in caches:
            src = Path(c) / "cubin"
            if (src / f"{name}.cubin").is_file() and (src / f"{name}.log").is_file():
                shutil.copy(src / f"{name}.cubin", out)
                shutil.copy(src / f"{name}.log", out)
                found += 1
                break
    return found


if __name__ == "__main__":
    if os.environ.get("SEED_FROM"):
        n = seed(collect(sys.argv[2]), sys.argv[2], os.environ["SEED_FROM"].split(":"))
        print(f"seeded {n} cubins from {os.environ['SEED_FROM']}")
    precompile_main(collect)
