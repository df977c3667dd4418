"""Issue #16 on the CPU: the three-stream pipeline of GPULeNet (upload of chunk i+1, kernels of chunk i,
download of chunk i-1) driven through a recording runtime whose streams and events log what is enqueued.
From the log the happens-before order the GPU would follow is rebuilt, and checked: every chunk is uploaded
before its kernels and downloaded after them, a slot's buffers are not overwritten while an earlier chunk
still uses them, and the engines really can overlap (nothing orders chunk i+1's upload after chunk i's
kernels)."""
import numpy as np
import pytest

from convnet import catalogue
from convnet.gpu.recorder import RecordingRuntime, _Buf, _Pool


class Stream:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def wait_for_event(self, ev):
        self.log.append(("wait", self.name, ev))


class Event:
    def __init__(self, log):
        self.log = log

    def record(self, stream=None):
        self.log.append(("record", stream.name if stream else "default", self))

    def synchronize(self):
        pass

    def time_since(self, other):
        return 1.0


class Buf(_Buf):
    def __init__(self, log, name, shape, dtype):
        super().__init__(shape, dtype)
        self.log, self.name = log, name

    def set_async(self, x, stream=None):
        self.log.append(("upload", stream.name, self.name))

    def get_async(self, stream=None, ary=None):
        self.log.append(("download", stream.name, self.name))


class Pool(_Pool):
    def __init__(self, log):
        self.log = log

    def get(self, name, shape, dtype=np.float32):
        return Buf(self.log, name, shape, dtype)


class Kernel:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def __call__(self, grid, block, *args, stream=None, **_):
        self.log.append(("kernel", stream.name if stream else "default", self.name))

    def allow_shared(self, nbytes):
        pass

    def blocks_per_sm(self, threads, shared=0):
        return 2


class LoggingRuntime(RecordingRuntime):
    def __init__(self):
        super().__init__()
        self.log, self.n_streams = [], 0
        self.pool = Pool(self.log)

    def kernel(self, kernel_file, name, defines, variant):
        self.module(kernel_file, defines)
        return Kernel(self.log, name)

    def stream(self):
        self.n_streams += 1
        return Stream(self.log, f"s{self.n_streams}")

    def event(self):
        return Event(self.log)

    def pinned(self, shape, dtype):
        return np.zeros(shape, dtype)


def happens_before(log):
    """Reachability over the ops of the log: stream order plus record(E) -> wait(E) edges."""
    ops = [i for i, e in enumerate(log) if e[0] in ("upload", "download", "kernel", "wait", "record")]
    last, preds, recorded = {}, {i: set() for i in ops}, {}
    for i in ops:
        kind, stream, what = log[i]
        if stream in last:
            preds[i] |= preds[last[stream]] | {last[stream]}
        if kind == "wait":
            j = recorded[id(what)]
            preds[i] |= preds[j] | {j}
        if kind == "record":
            recorded[id(what)] = i
        last[stream] = i
    return lambda a, b: a in preds[b]


@pytest.mark.parametrize("n,chunk", [(10000, 2500), (7001, 1000), (2501, 2500)])
def test_pipeline_orders_each_chunk_and_overlaps_the_engines(lenet_weights, n, chunk):
    import dataclasses
    from convnet.gpu.lenet import GPULeNet
    rt = LoggingRuntime()
    v = catalogue.get("tc_pipe")
    v = dataclasses.replace(v, params={**v.params, "pipeline_chunk": chunk})
    net = GPULeNet(v, lenet_weights, rt)
    rt.log.clear()
    net.forward(np.zeros((n, *net.input_shape), net.input_dtype), timed=True)
    log, hb = rt.log, happens_before(rt.log)
    # chunk of each op: uploads start a chunk, kernels and downloads belong to the last one started
    chunks, cur = [], -1
    for i, (kind, stream, what) in enumerate(log):
        if kind == "upload":
            cur += 1
            chunks.append({"up": i, "kernels": [], "down": [], "slot": what.split(".")[0]})
        elif kind == "kernel":
            chunks[cur]["kernels"].append(i)
        elif kind == "download":
            chunks[cur]["down"].append(i)
    assert len(chunks) == -(-n // chunk)
    streams = {(log[c["up"]][1], log[c["kernels"][0]][1], log[c["down"][0]][1]) for c in chunks}
    assert len(streams) == 1 and len(next(iter(streams))) == len(set(next(iter(streams))))   # three engines
    assert [c["slot"] for c in chunks] == [f"s{i % 2}" for i in range(len(chunks))]
    for i, c in enumerate(chunks):
        assert all(hb(c["up"], k) for k in c["kernels"])
        assert all(hb(k, d) for k in c["kernels"] for d in c["down"])
        if i >= 2:                                  # slot reuse: chunk i-2 has finished with the buffers
            assert all(hb(k, c["up"]) for k in chunks[i - 2]["kernels"])
            assert all(hb(d, c["kernels"][0]) for d in chunks[i - 2]["down"])
        if i >= 1:                                  # overlap: nothing serialises the engines
            assert not hb(chunks[i - 1]["kernels"][0], c["up"])
            assert not any(hb(k, chunks[i - 1]["down"][0]) for k in c["kernels"])


def test_small_batches_run_in_one_piece(lenet_weights):
    from convnet.gpu.lenet import GPULeNet
    rt = LoggingRuntime()
    net = GPULeNet(catalogue.get("tc_pipe"), lenet_weights, rt)
    rt.log.clear()
    net.forward(np.zeros((100, *net.input_shape), net.input_dtype), timed=False)
    assert not any(e[0] == "wait" for e in rt.log)
    assert [e[0] for e in rt.log if e[0] in ("upload", "download")] == ["upload", "download", "download"]
