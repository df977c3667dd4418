"""Runtime helpers without a GPU: median_ms (the one CUDA-event timing loop) on a stand-in runtime, and
ptr (every kernel pointer argument)."""
import numpy as np
import pytest

from convnet.gpu.runtime import Runtime, ptr


class _Event:
    clock = 0.0

    def record(self, stream=None):
        self.t = _Event.clock

    def synchronize(self):
        pass

    def time_since(self, other):
        return self.t - other.t


class _FakeRuntime:
    median_ms = Runtime.median_ms
    checked = Runtime.checked

    def __init__(self):
        self.synced, self.drv = [], type("drv", (), {"Error": RuntimeError})

    def event(self):
        return _Event()

    def synchronize(self, what):
        self.synced.append(what)


def test_median_of_timed_runs_after_warmup():
    rt, calls, durations = _FakeRuntime(), [], iter([5.0, 1.0, 2.0, 9.0, 3.0])

    def fn():
        calls.append(1)
        if len(calls) > 2:                       # the two warm-ups take no time here
            _Event.clock += next(durations)
    assert rt.median_ms(fn, reps=5, warmup=2, what="x") == 3.0
    assert len(calls) == 7 and rt.synced == ["x (warm-up)"]


def test_ptr_offsets_typed_arrays_and_passes_addresses_through():
    class Array:
        gpudata, dtype = 4096, np.dtype(np.float16)
    assert ptr(None) == 0 and ptr(None).dtype == np.uintp
    assert ptr(Array()) == 4096 and ptr(Array(), 10) == 4096 + 20
    assert ptr(np.uintp(123)) == 123 and ptr(77) == 77
    with pytest.raises(ValueError, match="typed device array"):
        ptr(np.uintp(123), 1)


def test_pool_upload_sizes_the_buffer_and_copies_contiguously(monkeypatch):
    """BufferPool.upload (every weight upload): the named buffer has the array's shape and the asked dtype,
    and receives a C-contiguous copy in that dtype (a transposed view included)."""
    from convnet.gpu.runtime import BufferPool

    class Buf:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, np.dtype(dtype)

        def set(self, a):
            assert a.flags.c_contiguous and a.dtype == self.dtype and a.shape == self.shape
            self.data = a.copy()

    pool = BufferPool(rt=None)
    asked = []
    monkeypatch.setattr(pool, "get", lambda name, shape, dtype=np.float32: asked.append(name) or Buf(shape, dtype))
    w = np.arange(6, dtype=np.float64).reshape(2, 3)
    buf = pool.upload("w1t", w.T)
    assert asked == ["w1t"] and buf.shape == (3, 2) and buf.dtype == np.float32
    assert np.array_equal(buf.data, w.T)
    assert pool.upload("w16", w, np.float16).data.dtype == np.float16
