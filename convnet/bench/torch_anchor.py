"""cuDNN (through PyTorch, when importable) on the same two conv layers, timed in the same process.

PyTorch is a measuring stick only; the package does not depend on it. fp32 with TF32 off, so the
comparison with our fp32 variants is like for like; and the configuration a user would pick for speed
(fp16, channels_last, torch.compile, from the uint8 pictures: the anchor of the fp16 tensor-core variants).
"""
from __future__ import annotations

import statistics

import numpy as np


def torch_median_ms(torch, fn, reps: int = 20, batch: int = 1) -> float:
    """Median milliseconds of fn() over `reps` runs on PyTorch's current stream, after one warm-up; batch > 1: each
    run is that many calls back to back, divided by it (Runtime.median_ms's batch)."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    return statistics.median(times)


def torch_fp32():
    """(torch, torch.nn.functional) set to true fp32 (TF32 off), or None without PyTorch or CUDA."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch, F


def time_cudnn(x, weights) -> dict | None:
    mods = torch_fp32()
    if mods is None:
        return None
    torch, F = mods
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    xt = torch.from_numpy(x).to(dev)
    w1 = torch.from_numpy(weights["conv1.weight"]).to(dev)
    w2 = torch.from_numpy(weights["conv2.weight"]).to(dev)
    with torch.no_grad():
        p1 = F.max_pool2d(F.relu(F.conv2d(xt, w1)), 2)
        out = {"torch": torch.__version__,
               "conv1_ms": torch_median_ms(torch, lambda: F.conv2d(xt, w1)),
               "conv2_ms": torch_median_ms(torch, lambda: F.conv2d(p1, w2))}
    return out


def time_torch_lenet(x, weights, compile_too: bool = True) -> dict | None:
    """The whole LeNet-86 forward in PyTorch (fp32, TF32 off), input already on the GPU: eager and, if
    it works here, torch.compile; median ms. None where PyTorch or CUDA is missing."""
    mods = torch_fp32()
    if mods is None:
        return None
    torch, F = mods
    dev = torch.device("cuda")
    w = {k: torch.from_numpy(v).to(dev) for k, v in weights.items()}
    xt = torch.from_numpy(x).to(dev)

    def forward(inp):
        h = F.max_pool2d(F.relu(F.conv2d(inp, w["conv1.weight"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, w["conv2.weight"])), 4)
        h = F.relu(F.linear(h.flatten(1), w["fc1.weight"], w["fc1.bias"]))
        return F.linear(h, w["fc2.weight"], w["fc2.bias"]).argmax(1)
    out = {"torch": torch.__version__}
    with torch.no_grad():
        out["eager_ms"] = torch_median_ms(torch, lambda: forward(xt))
        if compile_too:
            try:
                compiled = torch.compile(forward)
                compiled(xt)
                out["compile_ms"] = torch_median_ms(torch, lambda: compiled(xt))
            except Exception as e:          # no compiler toolchain on the machine, etc.
                out["compile_error"] = str(e).splitlines()[0][:120]
    return out


def time_torch_lenet_fp16(raw, weights, size: int = 86) -> dict | None:
    """PyTorch as a user tuning for speed would write LeNet-86: fp16 weights and activations, channels_last,
    torch.compile, from the uint8 28x28 pictures (scaled to [0, 1] and resized bilinearly on the GPU, as our
    fused conv1 does; skimage's resize of the reference is bilinear too). Median ms of the forward from the
    uint8 batch on the GPU to the predictions (`fp16_ms`), and end to end from pinned host memory to the
    predictions in host memory (`fp16_e2e_ms`). None where PyTorch or CUDA is missing; `fp16_error` if
    torch.compile fails here."""
    mods = torch_fp32()
    if mods is None or raw is None:
        return None
    torch, F = mods
    torch.backends.cudnn.benchmark = True
    dev, half, cl = torch.device("cuda"), torch.float16, torch.channels_last
    w = {k: torch.from_numpy(v).to(dev, half) for k, v in weights.items()}
    w["conv1.weight"] = w["conv1.weight"].contiguous(memory_format=cl)
    w["conv2.weight"] = w["conv2.weight"].contiguous(memory_format=cl)

    def forward(u8):
        h = u8.unsqueeze(1).to(half).mul_(1 / 255)
        h = F.interpolate(h, size=(size, size), mode="bilinear", align_corners=False)
        h = h.contiguous(memory_format=cl)
        h = F.max_pool2d(F.relu(F.conv2d(h, w["conv1.weight"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, w["conv2.weight"])), 4)
        h = F.relu(F.linear(h.flatten(1), w["fc1.weight"], w["fc1.bias"]))
        return F.linear(h, w["fc2.weight"], w["fc2.bias"]).argmax(1)
    host = torch.from_numpy(np.array(raw, np.uint8)).pin_memory()      # a writable copy (the loader's is read-only)
    gpu = host.to(dev)
    out = {"torch": torch.__version__}
    with torch.no_grad():
        try:
            compiled = torch.compile(forward)
            compiled(gpu)
        except Exception as e:
            out["fp16_error"] = str(e).splitlines()[0][:120]
            return out
        out["fp16_ms"] = torch_median_ms(torch, lambda: compiled(gpu))
        out["fp16_e2e_ms"] = torch_median_ms(torch, lambda: compiled(host.to(dev, non_blocking=True)).cpu())
    return out
