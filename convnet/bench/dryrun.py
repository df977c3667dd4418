"""A stand-in for the CUDA runtime that records which kernels a variant would build, with which -D
constants, and which it launches with which grids: the compile test builds exactly those on a machine
without a GPU, the benchmark compiles a sweep's kernels in parallel before timing them, and CPU tests
drive the host side of a forward pass through it."""
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..gpu import build


class _Buf:
    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.gpudata = shape, np.dtype(dtype), 0

    def set(self, _):
        pass

    def set_async(self, *_, **__):
        pass

    def get_async(self, *_, **__):
        pass

    def fill(self, _):
        pass


class _Pool:
    """Shape-only buffers, remembered by name as the real pool does (view, names, fill)."""
    generation = 0

    @property
    def _bufs(self) -> dict:
        return self.__dict__.setdefault("_named", {})

    def get(self, name, shape, dtype=np.float32):
        buf = self._bufs[name] = _Buf(shape, dtype)
        return buf

    def view(self, name):
        return self._bufs.get(name)

    def tickets(self, name, n):
        return self.get(name, (n,), np.uint32)

    def names(self, prefix=""):
        return [n for n in self._bufs if n.startswith(prefix)]

    def fill(self, prefix, value, dtype=None):
        return [n for n in self.names(prefix) if dtype is None or self._bufs[n].dtype == np.dtype(dtype)]

    def upload(self, name, array, dtype=np.float32):
        return _Buf(np.shape(array), dtype)


class _Module:
    def get_global(self, _):
        return 0, 1 << 16


class _Drv:
    @staticmethod
    def memcpy_htod(*_):
        pass

    @staticmethod
    def memcpy_dtod_async(*_):
        pass


class _Kernel:
    def __init__(self, name, launches):
        self.name, self.launches = name, launches

    def __call__(self, grid, block, *args, **kwargs):
        self.launches.append((self.name, tuple(grid), tuple(block), len(args)))

    def allow_shared(self, nbytes):
        pass

    def blocks_per_sm(self, threads, shared=0):
        return 2


class RecordingRuntime:
    sm_count = 132
    name = "no device (dry run)"
    arch = "sm_90a"

    def __init__(self):
        self.builds = set()
        self.entries = {}           # build -> the kernel names taken from it (the compile test checks each is there)
        self.launches = []          # (kernel name, grid, block, number of arguments) per launch
        self.pool = _Pool()
        self.drv = _Drv()

    def _record(self, kernel_file, defines, kernel=None) -> set:
        """Records the build that serves `kernel` (build.kernel_defines); returns its set of kernel names."""
        key = (kernel_file, tuple(sorted(build.kernel_defines(kernel_file, defines, kernel).items())))
        self.builds.add(key)
        return self.entries.setdefault(key, set())

    def module(self, kernel_file, defines, kernel=None):
        self._record(kernel_file, defines, kernel)
        return _Module()

    def kernel(self, kernel_file, name, defines, variant):
        self._record(kernel_file, defines, name).add(name)
        return _Kernel(name, self.launches)

    def stream(self):
        return None

    @contextmanager
    def checked(self, what):
        yield


def entries_of(make) -> dict:
    """{(kernel file, defines): the kernel names taken from that build} for what make(runtime) builds, without
    touching CUDA."""
    from ..gpu import cublas
    rt = RecordingRuntime()
    real_get = cublas.CuBLAS.get
    cublas.CuBLAS.get = classmethod(lambda cls: None)
    try:
        make(rt)
    finally:
        cublas.CuBLAS.get = real_get
    return rt.entries


def kernels_of(make) -> set:
    """The (kernel file, defines) pairs that make(runtime) builds, without touching CUDA."""
    return set(entries_of(make))


def precompile(builds, arch: str, workers: int | None = None) -> list:
    """Compiles (file, defines) pairs in parallel (one nvcc per core by default) into the disk cache; returns the
    ptxas reports."""
    import os
    with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda fd: build.compile_cubin(fd[0], dict(fd[1]), arch)[1], sorted(builds)))


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
