"""CUDA graphs through the driver API (ctypes): PyCUDA has no stream capture. A captured sequence of
launches replays with one call, so the host's per-launch cost (PyCUDA packs every argument list in
Python) leaves the loop: what matters when each kernel runs for microseconds, as in decoding."""
from __future__ import annotations

import ctypes
from functools import lru_cache

from ..errors import GPUError

CAPTURE_MODE_RELAXED = 2       # CU_STREAM_CAPTURE_MODE_RELAXED: other threads' CUDA calls stay legal


@lru_cache(maxsize=1)
def _libcuda():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise GPUError(f"cannot load the CUDA driver library for graphs: {e}") from None
    vp, c_int = ctypes.c_void_p, ctypes.c_int
    lib.cuStreamBeginCapture_v2.argtypes = [vp, c_int]
    lib.cuStreamEndCapture.argtypes = [vp, ctypes.POINTER(vp)]
    lib.cuGraphInstantiateWithFlags.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_ulonglong]
    lib.cuGraphLaunch.argtypes = [vp, vp]
    lib.cuGraphExecDestroy.argtypes = [vp]
    lib.cuGraphDestroy.argtypes = [vp]
    return lib


def _check(status: int, what: str):
    if status != 0:
        name = ctypes.c_char_p()
        lib = _libcuda()
        lib.cuGetErrorName(status, ctypes.byref(name))
        raise GPUError(f"{what} failed: {name.value.decode() if name.value else status}")


class Graph:
    """with Graph.capture(stream) as g: <launches on stream>;  then g.launch() replays them."""

    def __init__(self, stream):
        self.stream, self._graph, self._exec = stream, ctypes.c_void_p(), ctypes.c_void_p()

    @classmethod
    def capture(cls, stream):
        return cls(stream)

    def __enter__(self):
        _check(_libcuda().cuStreamBeginCapture_v2(ctypes.c_void_p(self.stream.handle), CAPTURE_MODE_RELAXED),
               "cuStreamBeginCapture")
        return self

    def __exit__(self, exc_type, exc, tb):
        lib = _libcuda()
        status = lib.cuStreamEndCapture(ctypes.c_void_p(self.stream.handle), ctypes.byref(self._graph))
        if exc_type is not None:
            return False                       # the launch error that broke the capture is the one to report
        _check(status, "cuStreamEndCapture")
        _check(lib.cuGraphInstantiateWithFlags(ctypes.byref(self._exec), self._graph, 0), "cuGraphInstantiate")
        return False

    def launch(self):
        _check(_libcuda().cuGraphLaunch(self._exec, ctypes.c_void_p(self.stream.handle)), "cuGraphLaunch")

    def __del__(self):
        try:
            lib = _libcuda()
            if self._exec:
                lib.cuGraphExecDestroy(self._exec)
            if self._graph:
                lib.cuGraphDestroy(self._graph)
        except Exception:                       # interpreter shutdown
            pass
