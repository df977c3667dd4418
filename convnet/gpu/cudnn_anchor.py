"""cuDNN (through PyTorch, when importable) on the same two conv layers, timed in the same process.

PyTorch is a measuring stick only; the package does not depend on it. fp32 with TF32 off, so the
comparison with our fp32 variants is like for like.
"""
from __future__ import annotations

import statistics


def _time(torch, fn, reps=20):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def time_cudnn(x, weights) -> dict | None:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    xt = torch.from_numpy(x).to(dev)
    w1 = torch.from_numpy(weights["conv1.weight"]).to(dev)
    w2 = torch.from_numpy(weights["conv2.weight"]).to(dev)
    with torch.no_grad():
        p1 = F.max_pool2d(F.relu(F.conv2d(xt, w1)), 2)
        out = {"torch": torch.__version__,
               "conv1_ms": _time(torch, lambda: F.conv2d(xt, w1)),
               "conv2_ms": _time(torch, lambda: F.conv2d(p1, w2))}
    return out
