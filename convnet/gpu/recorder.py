"""A stand-in for the CUDA runtime that records which kernels a model would build, with which -D constants, and
which it launches with which grids. The engine compiles a model's missing builds in parallel before constructing it
(convnet.gpu.ahead), `make kernels` collects the builds it ships, the compile test builds exactly those on a machine
without a GPU, and CPU tests drive the host side of a forward pass through it."""
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from . import build


class _Buf:
    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.gpudata = shape, np.dtype(dtype), 0

    def set(self, _):
        pass

    def set_async(self, *_, **__):
        pass

    def get_async(self, *_, **__):
        pass

    def get(self):
        return np.zeros(self.shape, self.dtype)

    def fill(self, _):
        pass

    def reshape(self, *shape):
        return _Buf(shape, self.dtype)


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

    @staticmethod
    def memcpy_htod_async(*_):
        pass

    @staticmethod
    def memcpy_dtoh_async(*_):
        pass

    @staticmethod
    def memset_d32_async(*_):
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


def entries_of(make, arch: str | None = None) -> dict:
    """{(kernel file, defines): the kernel names taken from that build} for what make(runtime) builds, without
    touching CUDA, on a GPU of `arch` (default sm_90a): the host side picks its kernels by the runtime's arch."""
    from . import cublas
    rt = RecordingRuntime()
    if arch:
        rt.arch = arch
    real_get = cublas.CuBLAS.get
    cublas.CuBLAS.get = classmethod(lambda cls: None)
    try:
        make(rt)
    finally:
        cublas.CuBLAS.get = real_get
    return rt.entries


def kernels_of(make, arch: str | None = None) -> set:
    """The (kernel file, defines) pairs that make(runtime) builds, without touching CUDA."""
    return set(entries_of(make, arch))


def precompile_made(makers, arch: str) -> list:
    """Compiles, in parallel, every build that one of makers (each make(runtime), e.g. a Linear of a benchmark's
    setting) records in a dry run: the family builds its launches take, before the first is needed."""
    return precompile(set().union(*(kernels_of(make, arch) for make in makers)), arch)


def precompile(builds, arch: str, workers: int | None = None) -> list:
    """Compiles (file, defines) pairs in parallel (one nvcc per core by default) into the disk cache; returns the
    ptxas reports."""
    import os
    with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda fd: build.compile_cubin(fd[0], dict(fd[1]), arch)[1], sorted(builds)))
