"""The CUDA context, kernel modules, device buffers, pinned host memory and event timers.

Everything CUDA goes through here, so that every failure becomes a GPUError naming the kernel and
the variant (PyCUDA raises on every failed driver call; launches are checked at the next sync).
"""
from __future__ import annotations

import atexit
from contextlib import contextmanager

import numpy as np

from ..errors import GPUError, GPUUnavailable
from . import build

MIN_CC = (7, 0)        # tensor-core kernels (mma.sync f16) need Volta or newer


class Runtime:
    """One per process: the primary context of device 0."""
    _instance = None

    @classmethod
    def get(cls) -> "Runtime":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        try:
            import pycuda.driver as drv
        except ImportError:
            from . import available
            raise GPUUnavailable(available()[1]) from None
        self.drv = drv
        try:
            drv.init()
            self.device = drv.Device(0)
        except drv.Error as e:
            raise GPUUnavailable(f"no usable CUDA device ({e})") from None
        cc = self.device.compute_capability()
        if cc < MIN_CC:
            raise GPUUnavailable(f"unsupported GPU {self.device.name()} (compute capability "
                                 f"{cc[0]}.{cc[1]}; {MIN_CC[0]}.{MIN_CC[1]} or newer needed)")
        # Hopper builds for sm_90a: its architecture-specific instructions (wgmma, gemm.cu v7) need it, and
        # such a cubin still runs everything else only on compute capability 9.0, which this device is.
        self.arch = "sm_90a" if cc == (9, 0) else f"sm_{cc[0]}{cc[1]}"
        self.name = self.device.name()
        build.set_driver_cuda(drv.get_driver_version())
        self.sm_count = self.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
        self.context = self.device.retain_primary_context()
        self.context.push()
        atexit.register(self._close)
        self._modules: dict = {}
        self.pool = BufferPool(self)

    def _close(self):
        try:
            self.pool.free()
            self.context.pop()
        except Exception:       # interpreter shutdown: the driver may already be gone
            pass

    def module(self, kernel_file: str, defines: dict, kernel: str | None = None):
        """The loaded build of kernel_file under defines; with `kernel`, the build of that kernel's family alone
        where the file marks families (build.kernel_defines)."""
        defines = build.kernel_defines(kernel_file, defines, kernel)
        key = (kernel_file, tuple(sorted(defines.items())))
        if key not in self._modules:
            cubin, _ = build.compile_cubin(kernel_file, defines, self.arch)
            try:
                self._modules[key] = self.drv.module_from_buffer(cubin)
            except self.drv.Error as e:
                raise GPUError(f"loading {kernel_file} failed: {e}") from None
        return self._modules[key]

    def kernel(self, kernel_file: str, name: str, defines: dict, variant: str) -> "Kernel":
        mod = self.module(kernel_file, defines, name)
        try:
            fn = mod.get_function(name)
        except self.drv.Error:
            raise GPUError(f"kernel {name} not found in {kernel_file}") from None
        return Kernel(self, fn, name, variant)

    def stream(self):
        return self.drv.Stream()

    def event(self):
        return self.drv.Event()

    def pinned(self, shape, dtype):
        try:
            return self.drv.pagelocked_empty(shape, dtype)
        except self.drv.Error as e:
            raise GPUError(f"cannot allocate {np.prod(shape) * np.dtype(dtype).itemsize / 2**20:.0f} MB "
                           f"of pinned host memory ({e})") from None

    def synchronize(self, what: str):
        """Waits for the device and turns an asynchronous kernel fault into a GPUError naming `what`."""
        try:
            self.context.synchronize()
        except self.drv.Error as e:
            raise GPUError(f"{what}: {e}") from None

    def median_ms(self, fn, reps: int = 20, warmup: int = 2, stream=None, what: str = "benchmark",
                  batch: int = 1, before=None) -> float:
        """Median milliseconds of fn() over `reps` runs, timed with CUDA events on `stream` after
        `warmup` untimed runs (faults surface as a GPUError naming `what`). batch > 1: each run is that many
        calls back to back between the events, divided by it, so that the host's launch of the first call (tens
        of us from Python) is not charged to a kernel of tens of us. before(): enqueued ahead of each timed run's
        start event (a spin kernel: the host then queues the whole run before the GPU starts it)."""
        import statistics
        for _ in range(warmup):
            fn()
        self.synchronize(f"{what} (warm-up)")
        start, end, times = self.event(), self.event(), []
        with self.checked(what):
            for _ in range(reps):
                if before is not None:
                    before()
                start.record(stream)
                for _ in range(batch):
                    fn()
                end.record(stream)
                end.synchronize()
                times.append(end.time_since(start) / batch)
        return statistics.median(times)

    @contextmanager
    def checked(self, what: str):
        try:
            yield
        except self.drv.Error as e:
            raise GPUError(f"{what}: {e}") from None


class Kernel:
    """A launchable function; a failed launch raises GPUError naming the kernel and the variant."""

    def __init__(self, rt: Runtime, fn, name: str, variant: str):
        self.rt, self.fn, self.name, self.variant = rt, fn, name, variant

    def allow_shared(self, nbytes: int):
        """Opts in to more than 48 KB of dynamic shared memory per block (up to the device's limit)."""
        drv = self.rt.drv
        limit = self.rt.device.get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        if nbytes > limit:
            raise GPUError(f"kernel {self.name} (variant {self.variant}) needs {nbytes} bytes of shared memory; "
                           f"{self.rt.name} allows {limit} per block")
        with self.rt.checked(f"setting the shared-memory size of {self.name}"):
            self.fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes))

    def blocks_per_sm(self, threads: int, shared: int = 0) -> int:
        """Blocks of `threads` threads that fit on one SM at once (registers, shared memory, threads)."""
        drv, dev = self.rt.drv, self.rt.device
        regs = max(1, self.fn.get_attribute(drv.function_attribute.NUM_REGS))
        smem = shared + self.fn.get_attribute(drv.function_attribute.SHARED_SIZE_BYTES)
        by_regs = dev.get_attribute(drv.device_attribute.MAX_REGISTERS_PER_MULTIPROCESSOR) // (regs * threads)
        by_threads = dev.get_attribute(drv.device_attribute.MAX_THREADS_PER_MULTIPROCESSOR) // threads
        by_smem = (dev.get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) // smem
                   if smem else by_threads)
        return max(1, min(by_regs, by_threads, by_smem))

    def __call__(self, grid, block, *args, stream=None, shared: int = 0):
        try:
            self.fn(*args, grid=tuple(int(g) for g in grid), block=tuple(int(b) for b in block),
                    stream=stream, shared=shared)
        except self.rt.drv.Error as e:
            raise GPUError(f"kernel {self.name} (variant {self.variant}) failed to launch "
                           f"with grid {grid}, block {block}: {e}") from None


class BufferPool:
    """Device buffers by name, allocated once and reused: no allocation in the timed path.

    A name keeps its largest allocation: asking for a smaller shape (the last, shorter chunk of a
    batch) hands out a view of it; only a larger request reallocates. Raw pointers taken from a
    buffer (e.g. inside a captured CUDA graph) stay valid until the name is asked for more bytes."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self._bases: dict = {}          # name -> flat uint8 GPUArray, the allocation
        self._bufs: dict = {}           # name -> the view last handed out
        # bumped whenever an allocation comes or goes (and when Linear reuses its TMA map slots): a CUDA graph
        # captured in one generation holds raw pointers that the next may have freed, so it is captured again
        self.generation = 0

    def get(self, name: str, shape, dtype=np.float32):
        import pycuda.gpuarray as ga
        shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        buf = self._bufs.get(name)
        if buf is not None and buf.shape == shape and buf.dtype == dtype:
            return buf
        nbytes = max(1, int(np.prod(shape)) * dtype.itemsize)
        base = self._bases.get(name)
        if base is None or base.nbytes < nbytes:
            self._bufs.pop(name, None)
            self._bases.pop(name, None)
            try:
                base = ga.empty((nbytes,), np.uint8)
            except self.rt.drv.MemoryError:
                raise GPUError(f"out of device memory allocating {name} ({nbytes / 2**20:.0f} MB); "
                               "try a smaller --batch") from None
            self._bases[name] = base
            self.generation += 1
        buf = ga.GPUArray(shape, dtype, gpudata=base.gpudata, base=base)
        self._bufs[name] = buf
        return buf

    def tickets(self, name: str, n: int):
        """n uint32 counters, zeroed when (re)allocated: the atomic tickets by which a kernel's last block
        finds out it is last; every launch leaves them zero again, so they are cleared only here."""
        old = self.view(name)
        buf = self.get(name, (n,), np.uint32)
        if old is None or tuple(old.shape) != (n,):
            buf.fill(np.uint32(0))
        return buf

    def upload(self, name: str, array, dtype=np.float32):
        """The named buffer, shaped like `array` and holding a contiguous copy of it in `dtype` (weights,
        uploaded once)."""
        buf = self.get(name, np.shape(array), dtype)
        buf.set(np.ascontiguousarray(array, dtype=dtype))
        return buf

    def names(self, prefix: str = "") -> list[str]:
        """The names handed out so far that start with `prefix` (tests and tools inspect buffers by name)."""
        return [n for n in self._bufs if n.startswith(prefix)]

    def view(self, name: str):
        """The buffer last handed out under `name` (its current shape and dtype), or None."""
        return self._bufs.get(name)

    def fill(self, prefix: str, value, dtype=None) -> list[str]:
        """Sets every element of every buffer whose name starts with `prefix` (of `dtype`, if given) to
        `value`: tests poison outputs and workspaces with NaN so that an element a kernel never writes shows.
        Returns the names it filled."""
        filled = []
        for name, buf in self._bufs.items():
            if name.startswith(prefix) and (dtype is None or buf.dtype == np.dtype(dtype)):
                if buf.dtype == np.float16:     # (PyCUDA's fill has no float16: the same bits as uint16)
                    buf.view(np.uint16).fill(np.float16(value).view(np.uint16))
                else:
                    buf.fill(buf.dtype.type(value))
                filled.append(name)
        return filled

    def release(self, name: str):
        """Frees a name's allocation (e.g. a one-off measurement buffer)."""
        self._bufs.pop(name, None)
        self._bases.pop(name, None)
        self.generation += 1

    def free(self):
        self._bufs.clear()
        self._bases.clear()

    @property
    def bytes_in_use(self) -> int:
        return sum(b.nbytes for b in self._bases.values())


def ptr(buf, offset_elems: int = 0) -> np.uintp:
    """Device pointer for a kernel argument: a GPUArray's data advanced by offset_elems of its elements,
    a raw allocation or address as is, NULL for None."""
    if buf is None:
        return np.uintp(0)
    if hasattr(buf, "gpudata"):
        return np.uintp(int(buf.gpudata) + offset_elems * buf.dtype.itemsize)
    if offset_elems:
        raise ValueError("an element offset needs a typed device array")
    return np.uintp(int(buf))


def i32(v) -> np.int32:
    return np.int32(v)


def f32(v) -> np.float32:
    return np.float32(v)


def cdiv(a: int, b: int) -> int:
    """Ceiling division: blocks needed to cover a items with b per block."""
    return -(-a // b)
