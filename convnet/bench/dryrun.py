"""The dry run's instruments: seeding a cache from others and the command line of tools/precompile_*.py. The
recorder itself is the engine's (convnet.gpu.recorder); its names are re-exported here for the tools and tests."""
from pathlib import Path

from ..gpu import build
from ..gpu.recorder import RecordingRuntime, entries_of, kernels_of, precompile, precompile_made

__all__ = ["RecordingRuntime", "entries_of", "kernels_of", "precompile", "precompile_made", "seed", "pack", "unpack",
           "precompile_main"]


def seed(builds: set, arch: str, caches: list) -> int:
    """Copies into this cache ($CONVNET_CACHE) the cubins (and logs) of `builds` that other cache folders already hold
    under the same key (same source, headers, flags, arch and nvcc); returns how many it has now."""
    import shutil
    out = build.cubin_dir()
    found = 0
    for f, d in builds:
        name = build.cache_name(f, dict(d), arch)
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


def pack(builds: set, arch: str, path) -> int:
    """Writes the cache's cubins and logs of `builds` to `path` as one .tar.xz (cubin/<name>.cubin, .log): what a
    device call carries instead of compiling them (the suite's 1,621 sm_90a builds: 17 MB). Returns the builds
    packed (those compiled; a build the cache lacks is left out)."""
    import tarfile
    src, n = build.cubin_dir(), 0
    tmp = Path(f"{path}.tmp")
    with tarfile.open(tmp, "w:xz", preset=6) as tar:
        for f, d in sorted(builds):
            name = build.cache_name(f, dict(d), arch)
            files = [src / f"{name}{build.suffix(arch)}", src / f"{name}.log"]
            if all(x.is_file() for x in files):
                for x in files:
                    tar.add(x, arcname=f"cubin/{x.name}")
                n += 1
    tmp.replace(path)
    return n


def unpack(path) -> int:
    """Unpacks a pack()ed file into this cache's cubin folder (only plain files directly under cubin/); returns how
    many files it wrote."""
    import tarfile
    out, n = build.cubin_dir(), 0
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "r:*") as tar:
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if not m.isfile() or len(parts) != 2 or parts[0] != "cubin" or parts[1].startswith("."):
                continue
            data = tar.extractfile(m).read()
            tmp = out / f".{parts[1]}.tmp"
            tmp.write_bytes(data)
            tmp.replace(out / parts[1])
            n += 1
    return n


def precompile_main(collect, argv=None) -> None:
    """The command line of tools/precompile_*.py: `[workers] [arch]` (16 workers; the arch defaults to this
    machine's GPU, and naming one, e.g. sm_90a, compiles on a machine without a GPU for a cache carried there).
    SEED_FROM=dir:dir...: builds already compiled into those cache folders are copied, not compiled again.
    PACK=file.tar.xz: the builds are then also packed into that file (pack: tools/gpu_suite.py unpacks it)."""
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
    if os.environ.get("PACK"):
        print(f"packed {pack(builds, arch, os.environ['PACK'])} builds into {os.environ['PACK']}")
