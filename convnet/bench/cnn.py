"""An ONNX network on the project's GPU path against PyTorch with the same weights (the Graph rebuilt from
torch.nn.functional): fp32 eager and fp16 channels_last under torch.compile, and onnxruntime on the same file where
it is installed (its CUDA provider where it has one, else its CPU one), in one process, wall-clock medians.

    convnet-bench cnn MODEL.onnx [--batch 10000] [--variants direct,igemm_f16,...] [--record] [--trace]

End to end means from a host array of images to host outputs for both sides; both start from page-locked
(pinned) host memory, filled before the timing (torch.Tensor.pin_memory; the runtime's pinned buffer)."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def torch_forward(graph, dtype, channels_last: bool, dev: str = "cuda"):
    """A callable x -> y running the graph with torch.nn.functional (weights on `dev` in dtype). A resize gathers
    and blends the taps graph.resize_taps gives, as the reference and the GPU path do (F.interpolate's coordinate
    modes are not ONNX's)."""
    import torch
    import torch.nn.functional as F
    from ..cnn.graph import conv_pads, resize_taps
    w = {}
    for i, layer in enumerate(graph.layers):
        a = layer.attrs
        if layer.op in ("conv", "dense"):
            w[i] = (torch.as_tensor(a["w"], device=dev, dtype=dtype), torch.as_tensor(a["b"], device=dev, dtype=dtype))
        if layer.op == "affine":
            w[i] = (torch.as_tensor(a["scale"], device=dev, dtype=dtype), torch.as_tensor(a["shift"], device=dev,
                                                                                         dtype=dtype))
        if layer.op == "bias":
            w[i] = torch.as_tensor(a["b"], device=dev, dtype=dtype)
        if layer.op == "resize":                # (rows, columns): taps as index tensors, weights in dtype
            (_, h, wd), (_, oh, ow) = graph.shapes[layer.inputs[0]], graph.shapes[layer.output]
            scales = a["scales"] or (None, None)
            w[i] = [tuple(torch.as_tensor(t, device=dev, dtype=torch.long) for t in taps[:2]) +
                    (torch.as_tensor(taps[2], device=dev, dtype=dtype),)
                    for taps in (resize_taps(h, oh, scales[0], a), resize_taps(wd, ow, scales[1], a))]

    def act(y, a):
        return {"relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
                "leaky": lambda v: F.leaky_relu(v, a.a), "clip": lambda v: torch.clamp(v, a.a, a.b),
                "hardsigmoid": lambda v: torch.clamp(v * a.a + a.b, 0, 1), "hardswish": F.hardswish, "silu": F.silu,
                "elu": lambda v: F.elu(v, a.a), "selu": lambda v: a.b * F.elu(v, a.a), "softplus": F.softplus,
                "mish": F.mish, "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
                "erf": torch.erf, "celu": lambda v: F.celu(v, a.a), "softsign": F.softsign,
                "logsigmoid": F.logsigmoid, "tanhshrink": F.tanhshrink, "none": lambda v: v}[a.kind](y)

    def resize(x, taps):
        (y0, y1, wy), (x0, x1, wx) = taps
        wy = wy.view(-1, 1)
        rows = lambda r: (1 - wx) * x[:, :, r][:, :, :, x0] + wx * x[:, :, r][:, :, :, x1]      # noqa: E731
        return (1 - wy) * rows(y0) + wy * rows(y1)

    def run(x):
        env = {graph.input: x}
        for i, layer in enumerate(graph.layers):
            ins = [env[t] for t in layer.inputs]
            a = layer.attrs
            if layer.op == "conv":
                t, l, b, r = conv_pads(layer, ins[0].shape[2], ins[0].shape[3])
                xin = F.pad(ins[0], (l, r, t, b)) if (t, l) != (b, r) else ins[0]
                pad = 0 if (t, l) != (b, r) else (t, l)
                y = act(F.conv2d(xin, w[i][0], w[i][1], a["stride"], pad, a["dilation"], a["group"]), layer.act)
            elif layer.op == "dense":
                y = act(ins[0].flatten(1) @ w[i][0] + w[i][1], layer.act)
            elif layer.op == "pool":
                t, l, b, r = a["pads"]
                f = F.max_pool2d if a["kind"] == "max" else F.avg_pool2d
                kw = {} if a["kind"] == "max" else {"count_include_pad": bool(a["count_pad"])}
                y = f(ins[0], a["kernel"], a["stride"], (t, l), ceil_mode=bool(a["ceil"]), **kw)
            elif layer.op == "gap":
                y = ins[0].mean((2, 3), keepdim=True)
            elif layer.op == "add":
                y = act(ins[0] + ins[1], layer.act)
            elif layer.op == "mul":
                y = act(ins[0] * ins[1], layer.act)
            elif layer.op == "affine":          # per channel of a map, or per feature of a flat tensor
                shape = (1, -1) + (1,) * (ins[0].dim() - 2)
                y = act(ins[0] * w[i][0].view(shape) + w[i][1].view(shape), layer.act)
            elif layer.op == "bias":
                y = ins[0] + w[i]
            elif layer.op == "concat":
                y = torch.cat(ins, 1)
            elif layer.op == "flatten":
                y = ins[0].flatten(1)
            elif layer.op == "squeeze":
                y = ins[0].reshape(ins[0].shape[0], *a["shape"])
            elif layer.op == "softmax":
                y = torch.softmax(ins[0], -1)
            elif layer.op == "logsoftmax":
                y = torch.log_softmax(ins[0], -1)
            elif layer.op == "resize":
                y = resize(ins[0], w[i])
            elif layer.op == "dilate":          # a ConvTranspose's zeros between pixels
                (sh, sw), (n, c, h, wd) = a["stride"], ins[0].shape
                y = ins[0].new_zeros((n, c, (h - 1) * sh + 1, (wd - 1) * sw + 1))
                y[:, :, ::sh, ::sw] = ins[0]
            elif layer.op == "act":
                y = act(ins[0], layer.act)
            else:
                raise AssertionError(f"torch_forward: layer op {layer.op!r}")
            env[layer.output] = y
        return env[graph.output]
    return run


def degenerate(out_ref: np.ndarray) -> str:
    """Why the error column means little for these outputs (float64 reference), or "": outputs near zero (random
    weights whose features vanish: fp16 underflows, ours and torch's alike) or the same for every image."""
    peak = float(np.abs(out_ref).max())
    if peak < 1e-4:
        return (f"the outputs are at most {peak:.1e} (random weights whose features vanish?): half precision "
                "underflows there, so its errors say nothing about the kernels")
    if len(out_ref) > 1 and float(np.ptp(out_ref, axis=0).max()) == 0.0:
        return "every image gives the same outputs (features that vanish?): the errors check little"
    return ""


def median_wall_ms(fn, repeat: int) -> tuple:
    """(median milliseconds of fn() over `repeat` calls after one untimed call, the last call's result)."""
    y = fn()
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        y = fn()
        walls.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(walls), y


ORT_QUICK_S, ORT_WARMUP = 0.05, 20   # onnxruntime runs quicker than this get ORT_WARMUP more untimed runs and `repeat`


def onnxruntime_rows(path: str, x: np.ndarray, out_ref: np.ndarray, repeat: int) -> list:
    """onnxruntime on the same file, where it is installed: (label, ms, max rel err on the first images) for its
    CUDA provider where that is available, else its CPU one. A run past ORT_QUICK_S (a large batch on the CPU) is
    timed 3 times at most; quicker ones (batch 1) are warmed up and timed `repeat` times, as our side is: with 3
    runs after one, onnxruntime's batch-1 medians read up to 27 % high on the H200 machine (VGG-CIFAR 0.217 ms against
    0.171 over 300 runs after 20)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return []
    providers = ["CUDAExecutionProvider"] if "CUDAExecutionProvider" in ort.get_available_providers() else \
        ["CPUExecutionProvider"]
    sess = ort.InferenceSession(str(path), providers=providers)
    name = sess.get_inputs()[0].name
    run = lambda: sess.run(None, {name: x})[0]                   # noqa: E731
    t0 = time.perf_counter()
    run()                                                         # (its first run sets up: not timed)
    fast = time.perf_counter() - t0 < ORT_QUICK_S
    for _ in range(ORT_WARMUP if fast else 0):                   # small batches: warmed and timed like ours
        run()
    ms, y = median_wall_ms(run, repeat if fast else min(repeat, 3))
    label = "onnxruntime_" + providers[0].removesuffix("ExecutionProvider").lower()
    n = len(out_ref)
    return [(label, ms, float(np.abs(y[:n] - out_ref).max() / np.abs(out_ref).max()))]


def torch_rows(g, x, out_ref, repeat: int) -> list:
    """PyTorch's rows of the same network and images: eager fp32, and fp16 channels_last under torch.compile (cuDNN),
    each end to end from pinned host memory."""
    import torch
    pin = torch.from_numpy(x).pin_memory()
    rows = []
    for label, dtype, cl, compile_ in (("pytorch_fp32_eager", torch.float32, False, False),
                                       ("pytorch_fp16_compile", torch.float16, True, True)):
        fwd = torch_forward(g, dtype, cl)
        fwd = torch.compile(fwd) if compile_ else fwd

        def run_torch():
            with torch.no_grad():
                xt = pin.to("cuda", non_blocking=True).to(dtype)
                if cl:
                    xt = xt.contiguous(memory_format=torch.channels_last)
                return fwd(xt).float().cpu().numpy()
        ms, y = median_wall_ms(run_torch, repeat)
        rows.append((label, ms, float(np.abs(y[:256] - out_ref).max() / np.abs(out_ref).max())))
    return rows


def bench(path: str, batch: int, variants, repeat: int = 10, trace: bool = False, anchors: bool = True) -> tuple:
    """(the table, its rows for --record: (variant, benchmark, ms, "ms")); trace: each variant's timeline_table after
    it; anchors: PyTorch (eager fp32, torch.compile fp16) and onnxruntime in the same run."""
    from ..cnn import graph as cg, reference
    from ..cnn.gpu import GPUNet
    from ..gpu.runtime import Runtime
    from ..catalogue import variant_spec
    g = cg.load(path)
    x = np.random.default_rng(0).standard_normal((batch, *g.input_shape)).astype(np.float32)
    x_pinned = Runtime.get().pinned(x.shape, np.float32)
    x_pinned[...] = x
    rows, traces = [], []
    out_ref = reference.forward(g, x[:256], np.float64)
    for variant in variants:
        net = GPUNet(g, variant_spec(variant, "onnx"))
        ms, y = median_wall_ms(lambda: net.forward(x_pinned), repeat)
        rows.append((variant, ms, float(np.abs(y[:256] - out_ref).max() / np.abs(out_ref).max())))
        if trace:
            traces.append(timeline_table(timeline(net, x_pinned), variant))
        net = None                  # its device buffers go before the next variant's
    if anchors:
        rows += torch_rows(g, x, out_ref, repeat) + onnxruntime_rows(path, x, out_ref, repeat)
    best = min(r[1] for r in rows[:len(variants)])
    lines = [f"{path} batch {batch}, end to end from pinned host images to host outputs (median of {repeat})",
             f"{'what':24s} {'ms':>9s} {'/ our best':>10s} {'max rel err':>12s}"]
    for label, ms, err in rows:
        lines.append(f"{label:24s} {ms:9.3f} {ms / best:10.2f} {err:12.2e}")
    note = degenerate(out_ref)
    if note:
        lines.append(f"note: {note}")
    for t in traces:
        lines += ["", t]
    what = (f"convnet-bench cnn {Path(path).stem} --batch {batch}: end to end, pinned host images to host outputs "
            f"(median of {repeat})")
    return "\n".join(lines), [(label, what, round(ms, 3), "ms") for label, ms, _ in rows]


def union_us(spans: list) -> float:
    """The time covered by (start, end) spans, overlaps counted once."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def timeline_table(events: list, label: str) -> str:
    """One forward's GPU activity as a table: events (name, start us, end us) from CUPTI; copies are the names that
    start with "Memcpy". Each kernel's calls and time, the uploads and downloads, and how long copies and kernels ran
    at once (the overlapped pipeline's point)."""
    if not events:
        return f"{label}: no GPU activity recorded"
    t0, t1 = min(e[1] for e in events), max(e[2] for e in events)
    span = t1 - t0
    rows = {}                                           # in order of first start
    for name, a, b in sorted(events, key=lambda e: e[1]):
        key = "uploads (host to device)" if name.startswith("Memcpy HtoD") else \
            "downloads (device to host)" if name.startswith("Memcpy DtoH") else name
        calls, us = rows.get(key, (0, 0.0))
        rows[key] = (calls + 1, us + b - a)
    copies = [(a, b) for n, a, b in events if n.startswith("Memcpy")]
    kernels = [(a, b) for n, a, b in events if not n.startswith("Memcpy")]
    both = union_us(copies) + union_us(kernels) - union_us(copies + kernels)
    lines = [f"{label}: one forward, {span:.0f} us from its first GPU event to its last (CUPTI)",
             f"{'what':40s} {'calls':>6s} {'us':>9s} {'of the span':>12s}"]
    for key, (calls, us) in rows.items():
        lines.append(f"{key[:40]:40s} {calls:6d} {us:9.1f} {us / span:11.0%}")
    lines.append(f"{'copies and kernels at once':40s} {'':6s} {both:9.1f} {both / span:11.0%}")
    return "\n".join(lines)


def timeline(net, x) -> list:
    """(name, start us, end us) of every GPU activity in one net.forward(x) after a warm one (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    net.forward(x)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        net.forward(x)
    return [(e.name, e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type.name == "CUDA"]


def split_specs(text: str) -> list:
    """'a,b@K=1,k=2,c' -> ['a', 'b@K=1,k=2', 'c']: a KEY=VALUE after a spec's '@' belongs to that spec."""
    specs = []
    for part in text.split(","):
        if specs and "=" in part and "@" not in part and "@" in specs[-1]:
            specs[-1] += "," + part
        elif part:
            specs.append(part)
    return specs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="convnet-bench cnn")
    p.add_argument("model")
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--variants", default="direct,direct_graph,igemm_f16,igemm_f16_graph",
                   help="comma list, each a variant or VARIANT@KEY=VALUE[,KEY=VALUE] (a param or -D constant), "
                        "e.g. igemm_f16_graph@nhwc_depthwise=1,pieces=4 (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--trace", action="store_true",
                   help="after each variant's timing, one forward's GPU timeline (torch.profiler): each kernel's calls "
                        "and time, the uploads and downloads, and how long copies and kernels overlapped")
    p.add_argument("--record", nargs="?", const=True, metavar="CSV",
                   help="append the figures to the results table (default: results/onnx.csv)")
    p.add_argument("--no-anchors", action="store_true",
                   help="time the variants only, without PyTorch and onnxruntime (an A/B of our kernels: torch.compile "
                        "alone takes tens of seconds a network)")
    a = p.parse_args(argv)
    table = None
    if a.record is not None:
        from ..results import table_path
        table = table_path("onnx", None if a.record is True else a.record)
    text, rows = bench(a.model, a.batch, split_specs(a.variants), a.repeat, a.trace, not a.no_anchors)
    print(text)
    if table is not None:
        from ..results import append
        append(table, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
