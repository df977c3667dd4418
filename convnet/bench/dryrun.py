"""The dry run's instruments: seeding a cache from others and the command line of tools/precompile_*.py. The
recorder itself is the engine's (convnet.gpu.recorder); its names are re-exported here for the tools and tests."""
from pathlib import Path

from ..gpu import build
from ..gpu.recorder import RecordingRuntime, entries_of, kernels_of, precompile

__all__ = ["RecordingRuntime", "entries_of", "kernels_of", "precompile", "seed", "precompile_main"]


def seed(builds: set, arch: str, caches: list) -> int:
    """Copies into this cache ($CONVNET_CACHE) the cubins (and logs) of `builds` that other cache folders already hold
    under the same key (same source, headers, flags, arch and nvcc); returns how many it has now."""
    import shutil
    out = build.cubin_dir()
    found = 0
    for f, d in builds:
        source = build.KERNELS_DIR / f
        name = f"{source.stem}-{build._key(source, [*build.BASE_FLAGS, *build.define_flags(dict(d))], arch)}"
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


def precompile_main(collect, argv=None) -> None:
    """The command line of tools/precompile_*.py: `[workers] [arch]` (16 workers; the arch defaults to this
    machine's GPU, and naming one, e.g. sm_90a, compiles on a machine without a GPU for a cache carried there).
    SEED_FROM=dir:dir...: builds already compiled into those cache folders are copied, not compiled again."""
    import os
    import sys
    import time
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1:
        arch = argv[1]
    else:
        from ..gpu.runtime import Runtime
        arch = Runtime.get().arch
    t0 = time.perf_counter()
    builds = collect(arch)
    if os.environ.get("SEED_FROM"):
        print(f"seeded {seed(builds, arch, os.environ['SEED_FROM'].split(':'))} of {len(builds)} builds from "
              f"{os.environ['SEED_FROM']}")
    precompile(builds, arch, int(argv[0]) if argv else 16)
    print(f"precompiled {len(builds)} builds for {arch} in {time.perf_counter() - t0:.0f} s")
