"""LeNet-86 streamed over several GPUs of one host (issue #16: `--stream N --devices all|0,1`).

The N images (the test set repeated, as for --stream) are cut into contiguous shares of whole chunks, one
per device, as even as the chunk count allows (`split`). Each share runs in its own process, spawned with
CUDA_VISIBLE_DEVICES naming its one GPU, so that process's Runtime is that GPU's primary context: no
context switching between threads and no GIL shared by the devices' launch loops. A worker builds GPULeNet
with the three-stream pipeline (`pipelined`: upload, kernels and download overlapped, two chunks of device
memory whatever the share), pins its share and its result arrays, compiles and warms up, then waits at a
barrier and spins to one shared instant so that every device starts together (`start_together`). A timed
pass (`StreamPass`) enqueues every chunk of the share with no host sync between them, writes the results
into the arrays pinned before the clock and waits once, for the last download. Each timed pass returns
its CUDA-event time and its wall start and end (time.monotonic: one clock for every process of the host). The shares' predictions, joined in share
order, are the single-GPU stream's: chunk for chunk the same images go through the same kernels.

Two shares may name the same GPU (two processes: two contexts on it). The tests do that where the host
has one GPU ("simulated"); the command line refuses duplicates (`parse_devices`).

Nothing here imports PyCUDA at module level: parsing and splitting run without a GPU.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time

import numpy as np

from ..errors import ConvnetError, GPUError, GPUUnavailable, UsageError

BARRIER_TIMEOUT_S = 1800     # a worker waits this long for the others to compile and warm up


def parse_devices(text: str):
    """The --devices value: "all", or the GPU numbers as a tuple in the order given. Refuses (UsageError,
    one line) anything else, negative numbers and a GPU named twice."""
    text = text.strip()
    if text.lower() == "all":
        return "all"
    parts = [p.strip() for p in text.split(",")]
    if not text or not all(p.isdigit() for p in parts):
        raise UsageError(f"--devices takes 'all' or GPU numbers separated by commas (e.g. 0,1), got {text!r}")
    devices = tuple(int(p) for p in parts)
    twice = sorted({d for d in devices if devices.count(d) > 1})
    if twice:
        raise UsageError(f"--devices names GPU {twice[0]} more than once")
    return devices


def device_count() -> int:
    """GPUs this process sees; GPUUnavailable (the same reason as every GPU option) where there are none."""
    from . import available
    ok, why = available()
    if not ok:
        raise GPUUnavailable(f"--devices needs a GPU: {why}")
    import pycuda.driver as drv
    return drv.Device.count()


def resolve_devices(spec, count: int | None = None) -> list[int]:
    """parse_devices' result against the GPUs of this host (`count`, default: asked of the driver):
    "all" is every one; a GPU that does not exist is refused in one line."""
    if isinstance(spec, str):
        spec = parse_devices(spec)
    count = device_count() if count is None else count
    if spec == "all":
        return list(range(count))
    for d in spec:
        if d >= count:
            have = "GPU 0" if count == 1 else f"GPUs 0..{count - 1}"
            raise UsageError(f"--devices: there is no GPU {d}; this host has {have}")
    return list(spec)


def split(n: int, chunk: int, k: int) -> list[tuple[int, int]]:
    """k contiguous shares (start, stop) of n images in whole chunks: the first n % chunks get one chunk
    more, the last chunk may be short, and a share is empty (start == stop) where there are fewer chunks
    than devices. Every share starts on a multiple of `chunk`, so each chunk holds the same images as in
    the single-GPU stream."""
    if n < 0 or chunk < 1 or k < 1:
        raise UsageError("split needs n >= 0, chunk >= 1 and at least one device")
    chunks = -(-n // chunk)
    per, extra = divmod(chunks, k)
    shares, start = [], 0
    for i in range(k):
        stop = min(n, start + (per + (i < extra)) * chunk)
        shares.append((start, stop))
        start = stop
    return shares


def pipelined(variant, chunk: int, streams: int = 1):
    """The variant with its batch cut into chunks: the three-stream pipeline (streams = 1), or chunks
    round-robin over `streams` streams."""
    if streams == 1:
        return dataclasses.replace(variant, streams=1, params={**variant.params, "pipeline_chunk": chunk})
    return dataclasses.replace(variant, streams=streams, params={**variant.params, "chunk": chunk})


def stream_images(n_or_range, data_dir=None, preprocessed: bool = False, progress: bool = False):
    """(images, labels) of the stream's images start..stop-1 (image i is test image i % 10000): raw uint8
    28x28, or the preprocessed float32 1x86x86 ones (progress: a bar while they are first preprocessed)."""
    from .. import data
    start, stop = (0, n_or_range) if isinstance(n_or_range, int) else n_or_range
    raw = data.load_raw("test", data_dir)
    idx = np.arange(start, stop) % len(raw.labels)
    if preprocessed:
        x, _ = data.load("test", data_dir, progress=progress)
        return x[idx], raw.labels[idx]
    return raw.images[idx], raw.labels[idx]


@dataclasses.dataclass
class Share:
    """What one device did: its images start..stop-1 and, per timed pass, GPU time and wall start/end."""
    device: int                       # the GPU number as the parent process counts them
    start: int
    stop: int
    name: str = ""
    gpu_ms: list = dataclasses.field(default_factory=list)
    t0: list = dataclasses.field(default_factory=list)
    t1: list = dataclasses.field(default_factory=list)
    device_mb: float = 0.0
    predictions: np.ndarray | None = None

    @property
    def images(self) -> int:
        return self.stop - self.start


class StreamPass:
    """Passes of a whole stream (or one device's share of it) through `net`'s three-stream pipeline into
    result arrays pinned once, here, and reused by every pass: a timed pass allocates, frees and copies
    nothing on the host and never waits for the device before its last chunk (GPULeNet.forward, which
    pins fresh result arrays per call and copies them out, cost 17 of 39.9 ms wall per 500k share in
    session 11). The predictions are in host memory (the pinned `pred`) when a pass returns."""

    def __init__(self, net, x_host):
        self.net, self.x_host, n = net, x_host, x_host.shape[0]
        self.chunk = int(net.variant.params.get("pipeline_chunk", 0)) or n
        self.logits = net.rt.pinned((n, 10), np.float32)
        self.pred = net.rt.pinned((n,), np.int32)

    def __call__(self) -> float:
        """One pass: every chunk enqueued on the pipeline's streams (no host sync between chunks), then one
        wait for the last download. Returns the GPU time (CUDA events, first upload to last download), ms."""
        rt = self.net.rt
        with rt.checked(f"variant {self.net.variant.name}: stream pass"):
            begin, end = rt.event(), rt.event()
            begin.record()                    # legacy default stream: after all earlier work
            self.net._pipelined(self.x_host, self.logits, self.pred, self.chunk, False)
            end.record()                      # waits for the pipeline's (blocking) streams
            end.synchronize()
        return end.time_since(begin)


def run_share(job: dict, ready) -> dict:
    """One device's share in this process (its Runtime: this process's GPU 0): build, pin the share and
    its results, warm up, then `repeat` timed passes (StreamPass), each after ready() (every device
    starting together) returns."""
    from .. import weights as wio
    from .lenet import GPULeNet, uploads_uint8
    from .runtime import Runtime
    v, (start, stop), chunk = job["variant"], job["share"], job["chunk"]
    u8 = uploads_uint8(v)
    images, _ = stream_images((start, stop), job.get("data_dir"))
    x = None if u8 else stream_images((start, stop), job.get("data_dir"), preprocessed=True)[0]
    rt = Runtime.get()
    net = GPULeNet(pipelined(v, chunk), wio.load(job["weights_path"]) if job.get("weights_path") else wio.load(), rt)
    x_host = net.host_input(x if x is not None else images, images)
    del x
    net.forward(x_host[:min(len(x_host), 3 * chunk)], timed=False)   # compile, allocate both pipeline slots
    one_pass = StreamPass(net, x_host)
    out = {"name": rt.name, "gpu_ms": [], "t0": [], "t1": [], "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
    pred = None
    for _ in range(job.get("repeat", 1)):
        ready()
        t0 = time.monotonic()
        gpu_ms = one_pass()
        t1 = time.monotonic()
        p = np.array(one_pass.pred)           # after the clock: the next pass writes the same pinned array
        if pred is not None and not np.array_equal(p, pred):
            raise GPUError(f"variant {v.name}: two passes over the same share predicted differently")
        pred = p
        out["gpu_ms"].append(gpu_ms)
        out["t0"].append(t0)
        out["t1"].append(t1)
    out["device_mb"] = rt.pool.bytes_in_use / 2**20
    out["predictions"] = pred
    return out


START_LEAD_S = 0.005         # every worker starts this long after the last one reached the barrier


def start_together(barrier, go) -> None:
    """What a worker's ready() does: wait at the barrier for every device, then spin until one shared
    time.monotonic() instant (set by one worker, START_LEAD_S ahead), so the devices' passes start within
    microseconds of each other rather than with the barrier's wake-up skew."""
    if barrier.wait(BARRIER_TIMEOUT_S) == 0:
        go.value = time.monotonic() + START_LEAD_S
    barrier.wait(BARRIER_TIMEOUT_S)           # every worker now sees go.value
    t = go.value
    while time.monotonic() < t:
        pass


def _worker(conn, barrier, go, job, runner):
    """A spawned process: runs `runner(job, ready)` and sends ("ok", result) or ("error", exception);
    a failure breaks the barrier so that no other worker waits for this one."""
    from threading import BrokenBarrierError
    os.environ["CUDA_VISIBLE_DEVICES"] = job["visible"]       # before anything initialises CUDA here
    try:
        result = runner(job, lambda: start_together(barrier, go))
        conn.send(("ok", result))
    except BrokenBarrierError:
        conn.send(("broken", None))
    except BaseException as e:                                 # noqa: BLE001 (sent to the parent, one line)
        barrier.abort()
        if not isinstance(e, ConvnetError):
            first = (str(e).strip().splitlines() or [""])[0]
            e = GPUError(f"{type(e).__name__}: {first}")
        conn.send(("error", e))
    finally:
        conn.close()


_spawn_lock = threading.Lock()


def _visible_name(device: int) -> str:
    """What CUDA_VISIBLE_DEVICES must say in a child for it to see this process's GPU `device` alone."""
    parent = os.environ.get("CUDA_VISIBLE_DEVICES")
    if parent is None:
        return str(device)
    names = [s.strip() for s in parent.split(",") if s.strip()]
    return names[device] if device < len(names) else str(device)


def run(variant, n: int, chunk: int, devices, weights_path=None, data_dir=None, repeat: int = 1,
        runner=run_share) -> list[Share]:
    """Streams images 0..n-1 over `devices` (GPU numbers of this process; a number given twice = two
    contexts on that GPU), one spawned process per non-empty share. Returns one Share per device, in order;
    a worker's failure is raised here (its one-line error, naming the GPU) after every worker has stopped.
    `runner` (default run_share) is what each process runs: the CPU tests pass one that needs no GPU."""
    import multiprocessing as mp
    from multiprocessing.connection import wait
    if n < 1 or chunk < 1 or repeat < 1 or not devices:
        raise UsageError("--stream, --chunk and the repeat count must be at least 1, with at least one GPU")
    shares = [Share(d, s0, s1) for d, (s0, s1) in zip(devices, split(n, chunk, len(devices)))]
    busy = [s for s in shares if s.images]
    ctx = mp.get_context("spawn")         # never fork a process that may hold a CUDA context
    barrier = ctx.Barrier(len(busy))
    go = ctx.Value("d", 0.0)              # the start instant (start_together)
    procs, pending = [], {}
    try:
        for s in busy:
            job = {"variant": variant, "share": (s.start, s.stop), "chunk": chunk, "repeat": repeat,
                   "weights_path": None if weights_path is None else str(weights_path),
                   "data_dir": None if data_dir is None else str(data_dir),
                   "device": s.device, "visible": _visible_name(s.device)}
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, args=(send, barrier, go, job, runner), daemon=True,
                            name=f"convnet-gpu{s.device}")
            with _spawn_lock:                 # the child inherits this environment from its first instruction
                before = os.environ.get("CUDA_VISIBLE_DEVICES")
                os.environ["CUDA_VISIBLE_DEVICES"] = job["visible"]
                try:
                    p.start()
                finally:
                    if before is None:
                        del os.environ["CUDA_VISIBLE_DEVICES"]
                    else:
                        os.environ["CUDA_VISIBLE_DEVICES"] = before
            send.close()
            procs.append(p)
            pending[recv] = (s, p)
        errors = []
        while pending:
            for conn in wait(list(pending)):
                s, p = pending.pop(conn)
                try:
                    kind, payload = conn.recv()
                except EOFError:              # the process died without a word (a signal, a crash in C)
                    p.join(5)
                    kind, payload = "error", GPUError(f"the process for GPU {s.device} exited with code {p.exitcode}")
                conn.close()
                if kind == "ok":
                    s.name, s.device_mb, s.predictions = payload["name"], payload["device_mb"], payload["predictions"]
                    s.gpu_ms, s.t0, s.t1 = payload["gpu_ms"], payload["t0"], payload["t1"]
                elif kind == "error":
                    errors.append((s.device, payload))
                    barrier.abort()
        if errors:
            d, e = errors[0]
            raise type(e)(f"GPU {d}: {e}")
        if any(s.images and s.predictions is None for s in shares):
            raise GPUError("a device stopped at the barrier without an error")
        return shares
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.terminate()
                p.join()


def predictions(shares: list[Share]) -> np.ndarray:
    """Every image's predicted class, in image order (the shares joined)."""
    return np.concatenate([s.predictions for s in shares if s.images]).astype(np.int32)


def digest(pred: np.ndarray) -> str:
    """A short fingerprint of predicted classes (sha256 of them as little-endian int32): equal digests,
    equal predictions for every image."""
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(pred, dtype="<i4").tobytes()).hexdigest()[:16]


def simulated(devices) -> bool:
    """Whether several shares share a GPU (contexts simulating GPUs the host does not have)."""
    return len(set(devices)) < len(devices)
