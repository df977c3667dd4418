"""LeNet-86 on the GPU: the whole forward pass (upload, conv1, ReLU+pool, conv2, ReLU+pool, FC1+ReLU,
FC2, argmax, download) enqueued on streams, with CUDA-event timings per stage.

One batch goes through in one piece, except for variants with `streams > 1` (req_0): the batch is cut
into chunks pipelined round-robin over the streams, each with its own buffers, so the upload of one
chunk overlaps the kernels of another. With the param `pipeline_chunk` (issue #16) a batch larger than
that is cut into chunks on three streams, one per engine: the upload of chunk i+1 (copy engine in), the
kernels of chunk i and the download of chunk i-1 (copy engine out) run at once, ordered by events, with
the device buffers of two chunks alternating (memory: two chunks, whatever the batch).

With the param `zero_copy` (issue #16, uint8 input and a fused head only) nothing is copied: with unified
addressing a page-locked host buffer's pointer is valid on the device, so conv1 reads the images from the
pinned input and the head writes logits and predictions into the pinned result arrays across PCIe (the
upload and download marks then enclose nothing; a graph of the pipeline holds only kernels).

Variant params that change the pipeline (issue #4): `fuse_pool` runs each conv with its ReLU and
max-pool in one kernel (the pre-pool activation never reaches device memory); `gpu_upscale` uploads
the 28x28 uint8 images and does the 28->86 preprocessing on the GPU, `fuse_upscale` inside conv1's
kernel (the 86x86 image never exists); `fc = "fused"` runs FC1 + ReLU, FC2 and argmax as one kernel,
`fc = "mma"` the same on tensor cores (fc_head_mma.cu, ops.FCHeadMma; issue #16; `fc_stage_out`: its
results written as contiguous runs, STAGE_OUT). `fuse_conv12` (issue #16 session 11) runs conv1 and conv2
(each with its ReLU + pool) as one kernel (conv_px_mma FUSE_CONV2): conv1's map stays in shared memory, and
the conv1 span holds both layers (conv2's is 0).
"""
from __future__ import annotations

import statistics

import numpy as np

from .. import report
from ..network import CONV_LAYERS
from .conv import make_conv
from .gemm import BIAS_COL, Gemm
from .ops import Argmax, FCHead, FCHeadMma, ReluMaxPool, Upscale
from .runtime import Runtime

MARKS = ("start", "up_end", "uploaded", "conv1", "pool1", "conv2", "pool2", "classified", "downloaded")
STAGE_SPANS = {"conv1": ("uploaded", "conv1"), "pool1": ("conv1", "pool1"), "conv2": ("pool1", "conv2"),
               "pool2": ("conv2", "pool2"), "fc": ("pool2", "classified")}


def uploads_uint8(variant) -> bool:
    """Whether the variant takes the raw 28x28 uint8 images (resized on the GPU, alone or inside conv1)."""
    return bool(variant.params.get("gpu_upscale") or variant.params.get("fuse_upscale"))


class _HostView:
    """A page-locked host array where a kernel takes a device array (zero_copy): under unified addressing
    its host pointer is its device pointer."""

    def __init__(self, ary):
        self.shape, self.dtype = ary.shape, ary.dtype
        self.gpudata = np.uintp(ary.__array_interface__["data"][0])


class GPULeNet:
    def __init__(self, variant, weights: dict, rt: Runtime | None = None):
        self.rt = rt = rt or Runtime.get()
        if isinstance(rt, Runtime):                 # missing builds compiled at once, in parallel, not one by one
            from .ahead import ensure
            ensure(lambda r: GPULeNet(variant, weights, r), rt.arch, f"LeNet {variant.name}")
        self.variant = variant
        self.half = variant.precision == "fp16"
        self.act = np.float16 if self.half else np.float32
        pool1, pool2 = (p for _, p in CONV_LAYERS)
        d = variant.defines
        self.fuse_pool = bool(variant.params.get("fuse_pool"))
        self.fuse_upscale = bool(variant.params.get("fuse_upscale"))
        self.uint8_input = uploads_uint8(variant)
        if self.fuse_upscale and not self.fuse_pool:
            raise ValueError(f"variant {variant.name}: fuse_upscale needs fuse_pool")
        self._pipe_streams = None             # the three streams of a pipelined forward, made once
        self.zero_copy = bool(variant.params.get("zero_copy"))
        if self.zero_copy and not (self.uint8_input and variant.params.get("fc") in ("fused", "mma")):
            raise ValueError(f"variant {variant.name}: zero_copy needs uint8 input and a fused FC head")
        if self.zero_copy and hasattr(rt, "device") and not rt.device.get_attribute(
                rt.drv.device_attribute.UNIFIED_ADDRESSING):
            raise ValueError(f"variant {variant.name}: zero_copy needs a device with unified addressing")
        self.input_shape = (28, 28) if self.uint8_input else (1, 86, 86)
        self.input_dtype = np.uint8 if self.uint8_input else self.act
        if self.fuse_pool:        # conv2's pooled output feeds the fp32 FC layers
            up = {"upscale_from": (28, 28)} if self.fuse_upscale else {}
            if variant.params.get("fuse_conv12"):          # one kernel for both layers (conv_px_mma FUSE_CONV2)
                if variant.params.get("conv1_strategy", variant.strategy) != "mma_px" or not self.fuse_upscale:
                    raise ValueError(f"variant {variant.name}: fuse_conv12 needs conv1_strategy mma_px and fuse_upscale")
                self.conv1 = make_conv(rt, variant, weights["conv1.weight"], (1, 86, 86), "conv1", pool=pool1,
                                       fuse_conv2=(weights["conv2.weight"], pool2), **up)
                self.conv2 = None
            else:
                self.conv1 = make_conv(rt, variant, weights["conv1.weight"], (1, 86, 86), "conv1", pool=pool1, **up)
                self.conv2 = make_conv(rt, variant, weights["conv2.weight"], (4, 40, 40), "conv2", pool=pool2,
                                       out_half=False)
        else:
            self.conv1 = make_conv(rt, variant, weights["conv1.weight"], (1, 86, 86), "conv1")
            self.conv2 = make_conv(rt, variant, weights["conv2.weight"], (4, 40, 40), "conv2")
            self.pool1 = ReluMaxPool(rt, variant.name, pool1, self.half, self.half, d)
            self.pool2 = ReluMaxPool(rt, variant.name, pool2, self.half, False, d)   # the FC layers run in fp32
        if self.uint8_input and not self.fuse_upscale:
            self.upscale = Upscale(rt, variant.name, self.half, d)
        restrict = {k: v for k, v in d.items() if k == "USE_RESTRICT"}
        fc_names = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
        self.fc_head = None
        if variant.params.get("fc") == "fused":
            self.fc_head = FCHead(rt, variant.name, *(weights[k] for k in fc_names), restrict)
        elif variant.params.get("fc") == "mma":
            self.fc_head = FCHeadMma(rt, variant.name, *(weights[k] for k in fc_names),
                                     {"STAGE_OUT": 1} if variant.params.get("fc_stage_out") else {})
        else:
            gemm_version = variant.params.get("fc_gemm", variant.params.get("gemm", "regtile"))
            self.fc = Gemm(rt, gemm_version, restrict, variant.name)
            self.argmax = Argmax(rt, variant.name, {})
            self.fc_w = {name: rt.pool.upload(name, weights[name]) for name in fc_names}

    # -- one chunk of the pipeline on one stream -----------------------------------------------------
    def _buffers(self, slot: int, n: int):
        g = self.rt.pool.get
        bufs = {
            "p2": g(f"s{slot}.p2", (n, 16, 8, 8), np.float32),
            "z": g(f"s{slot}.z", (n, 10), np.float32),
            "pred": g(f"s{slot}.pred", (n,), np.int32),
        }
        if self.conv2 is not None:            # (fuse_conv12: conv1's map never leaves the kernel)
            bufs["p1"] = g(f"s{slot}.p1", (n, 4, 40, 40), self.act)
        if not self.fc_head:
            bufs["h"] = g(f"s{slot}.h", (n, 128), np.float32)
        if not self.fuse_upscale:
            bufs["x"] = g(f"s{slot}.x", (n, 1, 86, 86), self.act)
        if not self.fuse_pool:
            bufs["y1"] = g(f"s{slot}.y1", self.conv1.out_shape(n), self.act)
            bufs["y2"] = g(f"s{slot}.y2", self.conv2.out_shape(n), self.act)
        if self.uint8_input:
            bufs["u8"] = g(f"s{slot}.u8", (n, 28, 28), np.uint8)
        return bufs

    def _enqueue(self, x_host, logits_host, pred_host, s0, n, slot, stream, events):
        b = self._buffers(slot, n)
        rec = (lambda name: events[name].record(stream)) if events else (lambda name: None)
        rec("start")
        self._results(b, logits_host, pred_host, s0, n)
        self._upload(b, x_host, s0, n, stream)
        rec("up_end")
        rec("uploaded")
        self._compute(b, n, stream, slot, rec)
        self._download(b, logits_host, pred_host, s0, n, stream)
        rec("downloaded")

    def _upload(self, b, x_host, s0, n, stream):
        if self.zero_copy:                    # conv1 reads the pinned images themselves
            b["u8"] = _HostView(x_host[s0:s0 + n])
            return
        if self.uint8_input:
            b["u8"].set_async(x_host[s0:s0 + n], stream=stream)
            if not self.fuse_upscale:         # else conv1 resizes while it stages its tiles
                self.upscale(b["u8"], b["x"], n, stream)
        else:
            b["x"].set_async(x_host[s0:s0 + n], stream=stream)

    def _download(self, b, logits_host, pred_host, s0, n, stream):
        if self.zero_copy:                    # the head has written them (_results)
            return
        b["z"].get_async(stream=stream, ary=logits_host[s0:s0 + n])
        b["pred"].get_async(stream=stream, ary=pred_host[s0:s0 + n])

    def _results(self, b, logits_host, pred_host, s0, n):
        """zero_copy: the head writes into the pinned result arrays (b is this chunk's own dict)."""
        if self.zero_copy:
            b["z"], b["pred"] = _HostView(logits_host[s0:s0 + n]), _HostView(pred_host[s0:s0 + n])

    def _compute(self, b, n, stream, slot, rec):
        """Every kernel of one chunk, from its uploaded input to logits and predictions in b."""
        if self.fuse_pool and self.conv2 is None:   # fuse_conv12: one kernel from the images to conv2's pool
            self.conv1(b["u8"], b["p2"], n, stream, slot)
            for mark in ("conv1", "pool1", "conv2", "pool2"):
                rec(mark)
        elif self.fuse_pool:                  # conv + ReLU + pool in one kernel: op time = layer time
            self.conv1(b["u8"] if self.fuse_upscale else b["x"], b["p1"], n, stream, slot)
            rec("conv1")
            rec("pool1")
            self.conv2(b["p1"], b["p2"], n, stream, slot)
            rec("conv2")
            rec("pool2")
        else:
            self.conv1(b["x"], b["y1"], n, stream, slot)
            rec("conv1")
            self.pool1(b["y1"], b["p1"], n * 4, 80, 80, stream)
            rec("pool1")
            self.conv2(b["p1"], b["y2"], n, stream, slot)
            rec("conv2")
            self.pool2(b["y2"], b["p2"], n * 16, 34, 34, stream)
            rec("pool2")
        if self.fc_head:
            self.fc_head(b["p2"], b["z"], b["pred"], n, stream)
        else:
            self._fc(b, n, stream)
        rec("classified")

    def _pipelined(self, x_host, logits, pred, chunk, timed):
        """Upload of chunk i+1, kernels of chunk i, download of chunk i-1 on three streams (see the module
        docstring); buffers alternate between two slots, so chunk i waits for chunk i-2 to leave them.
        Returns each chunk's events (None untimed)."""
        rt, n = self.rt, x_host.shape[0]
        if self._pipe_streams is None:
            self._pipe_streams = [rt.stream() for _ in range(3)]
        up, comp, down = self._pipe_streams
        done_comp, done_down, per_chunk = [], [], []
        for i, s0 in enumerate(range(0, n, chunk)):
            m, slot = min(chunk, n - s0), i % 2
            b = self._buffers(slot, m)
            ev = {k: rt.event() for k in MARKS} if timed else None
            if i >= 2:
                up.wait_for_event(done_comp[i - 2])      # chunk i-2's kernels have read this slot's input
            if timed:
                ev["start"].record(up)
            self._results(b, logits, pred, s0, m)
            self._upload(b, x_host, s0, m, up)
            uploaded = ev["up_end"] if timed else rt.event()
            uploaded.record(up)
            comp.wait_for_event(uploaded)
            if i >= 2:
                comp.wait_for_event(done_down[i - 2])    # chunk i-2's logits and predictions have left
            rec = (lambda name: ev[name].record(comp)) if timed else (lambda name: None)
            rec("uploaded")                              # here: the chunk's kernels may start
            self._compute(b, m, comp, slot, rec)
            computed = ev["classified"] if timed else rt.event()
            if not timed:
                computed.record(comp)
            down.wait_for_event(computed)
            self._download(b, logits, pred, s0, m, down)
            downloaded = ev["downloaded"] if timed else rt.event()
            downloaded.record(down)
            done_comp.append(computed)
            done_down.append(downloaded)
            per_chunk.append(ev)
        return per_chunk

    def _fc(self, b, n, stream):
        w = self.fc_w
        self.fc(b["p2"].gpudata, w["fc1.weight"].gpudata, b["h"].gpudata, n, 128, 1024, (1024, 1), (1, 1024),
                (128, 1), bias=w["fc1.bias"].gpudata, bias_mode=BIAS_COL, relu=True, stream=stream)
        self.fc(b["h"].gpudata, w["fc2.weight"].gpudata, b["z"].gpudata, n, 10, 128, (128, 1), (1, 128),
                (10, 1), bias=w["fc2.bias"].gpudata, bias_mode=BIAS_COL, stream=stream)
        self.argmax(b["z"], b["pred"], n, 10, stream)

    def host_input(self, x, raw):
        """The pinned host array this pipeline uploads: raw uint8 images, or the preprocessed batch."""
        src = raw if self.uint8_input else x
        if src.shape[1:] != self.input_shape:
            raise ValueError(f"{self.variant.name} takes input images of shape {self.input_shape}, got {src.shape[1:]}")
        x_host = self.rt.pinned(src.shape, self.input_dtype)
        x_host[...] = src
        return x_host

    def forward(self, x_host, timed: bool = True) -> tuple[np.ndarray, np.ndarray, dict]:
        """x_host: from host_input(). Returns logits, predictions, times (ms)."""
        rt, n = self.rt, x_host.shape[0]
        n_streams = max(1, int(self.variant.streams))
        chunk = n if n_streams == 1 else min(n, int(self.variant.params.get("chunk", 1000)))
        pipe_chunk = int(self.variant.params.get("pipeline_chunk", 0))
        logits = rt.pinned((n, 10), np.float32)
        pred = rt.pinned((n,), np.int32)
        streams = [rt.stream() for _ in range(n_streams)]
        with rt.checked(f"variant {self.variant.name}: forward pass"):
            begin, end = rt.event(), rt.event()
            per_chunk = []
            begin.record()                    # legacy default stream: after all earlier work
            if n_streams == 1 and 0 < pipe_chunk < n:
                per_chunk = self._pipelined(x_host, logits, pred, pipe_chunk, timed)
            else:
                for i, s0 in enumerate(range(0, n, chunk)):
                    slot = i % n_streams
                    ev = {k: rt.event() for k in MARKS} if timed else None
                    self._enqueue(x_host, logits, pred, s0, min(chunk, n - s0), slot, streams[slot], ev)
                    per_chunk.append(ev)
            end.record()                      # waits for every (blocking) stream
            end.synchronize()                 # inside checked(): a kernel fault surfaces here, named
        times = {"total": end.time_since(begin)}
        if timed:
            def span(a, z):
                return sum(ev[z].time_since(ev[a]) for ev in per_chunk)
            # each stage's kernels alone (the roofline's stages); the conv stages are the op times
            stages = {name: span(a, z) for name, (a, z) in STAGE_SPANS.items()}
            times.update(stages, op1=stages["conv1"], op2=stages["conv2"], layer1=span("start", "pool1"),
                         layer2=span("pool1", "pool2"), upload=span("start", "up_end"),
                         download=span("classified", "downloaded"), compute=span("uploaded", "classified"))
        return np.array(logits), np.array(pred), times

    def capture(self, x_host):
        """The whole single-stream pipeline on x_host's pinned buffer (upload, every kernel, download)
        as one CUDA graph: a replay costs one launch instead of one per kernel and copy, which is what
        small batches are bound by. Returns (graph, logits, predictions): the replays write the latter
        two pinned arrays; refill x_host in place to classify other images of the same count."""
        from ..errors import GPUError
        from .graph import Graph
        if int(self.variant.streams) > 1:
            raise GPUError(f"variant {self.variant.name} pipelines over {self.variant.streams} streams; "
                           "a graph captures one")
        rt, n = self.rt, x_host.shape[0]
        logits, pred = rt.pinned((n, 10), np.float32), rt.pinned((n,), np.int32)
        stream = rt.stream()
        with rt.checked(f"variant {self.variant.name}: graph warm-up"):
            self._enqueue(x_host, logits, pred, 0, n, 0, stream, None)     # allocates every buffer
            stream.synchronize()
        graph = Graph.capture(stream)
        with graph:
            self._enqueue(x_host, logits, pred, 0, n, 0, stream, None)
        return graph, logits, pred


def classify(net: GPULeNet, x=None, raw=None, chunk: int = 10000) -> np.ndarray:
    """Logits (N, 10) float32 of any number of images through one GPULeNet, `chunk` at a time through one
    pinned input buffer and the network's device buffers, so memory stays bounded by the chunk.
    x: preprocessed (N, 1, 86, 86); raw: the same images as (N, 28, 28) uint8; only the one the variant
    uploads (uploads_uint8) is needed."""
    src = raw if net.uint8_input else x
    if src is None:
        raise ValueError(f"{net.variant.name} takes {'raw uint8' if net.uint8_input else 'preprocessed'} images")
    if src.shape[1:] != net.input_shape:
        raise ValueError(f"{net.variant.name} takes input images of shape {net.input_shape}, got {src.shape[1:]}")
    logits = np.empty((len(src), 10), np.float32)
    pinned = net.rt.pinned((min(chunk, len(src)),) + net.input_shape, net.input_dtype)
    for s0 in range(0, len(src), chunk):
        part = pinned[:len(src[s0:s0 + chunk])]
        part[...] = src[s0:s0 + chunk]
        logits[s0:s0 + len(part)] = net.forward(part, timed=False)[0]
    return logits


def run(variant, x, labels, weights, repeat: int = 1, raw=None) -> report.RunResult:
    """One warm-up pass (compiles, allocates), then `repeat` timed passes; the median of each figure.
    x: preprocessed images; raw: the same images as 28x28 uint8 (for variants that upload uint8)."""
    rt = Runtime.get()
    net = GPULeNet(variant, weights, rt)
    x_host = net.host_input(x, raw)
    net.forward(x_host, timed=False)
    runs = [net.forward(x_host) for _ in range(repeat)]
    _, pred, _ = runs[-1]
    med = {k: statistics.median(r[2][k] for r in runs) for k in runs[0][2]}
    acc = float((pred == labels).mean())
    extra = {"gpu": True, "times": med, "streams": int(variant.streams),
             "overlap": (med["upload"] + med["compute"] + med["download"]) / med["total"],
             "device_mem_mb": rt.pool.bytes_in_use / 2**20}
    return report.RunResult(variant.name, len(labels), rt.name, [med["op1"], med["op2"]],
                            [med["layer1"], med["layer2"]], med["total"], acc, extra, predictions=pred)
