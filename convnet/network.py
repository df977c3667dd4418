"""LeNet-86: conv(1->4, 7x7) ReLU maxpool2, conv(4->16, 7x7) ReLU maxpool4, FC 1024->128 ReLU,
FC 128->10, softmax. The numpy forward pass, in batch chunks so that memory stays bounded."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import reference as ref

INPUT_SHAPE = (1, 86, 86)
CONV_LAYERS = (  # (weight name, pool window)
    ("conv1.weight", 2),
    ("conv2.weight", 4),
)
# Images per chunk: conv1's im2col is 1.25 MB an image in float32, so 16 keep it near the caches (20 MB). 2,000
# images took 2.1 s in chunks of 16 against 4.3 s in chunks of 250 (2-core Xeon, OpenBLAS, medians of 5 alternated
# runs); the main job at 10,000 images 11.8 s against 19.4 s.
REFERENCE_CHUNK = 16


@dataclass
class Timings:
    """Seconds spent per stage, summed over chunks. op = the convolution alone;
    layer = convolution + ReLU + pooling (+ transfers on the GPU)."""
    op: list = field(default_factory=lambda: [0.0, 0.0])
    layer: list = field(default_factory=lambda: [0.0, 0.0])
    total: float = 0.0


def features(x, weights, dtype=np.float32, timings: Timings | None = None):
    """The two conv blocks: (B,1,86,86) -> (B,16,8,8)."""
    for i, (name, pool) in enumerate(CONV_LAYERS):
        t0 = time.perf_counter()
        y = ref.conv2d(x, weights[name], dtype=dtype)
        t1 = time.perf_counter()
        x = ref.relu(ref.maxpool2d(y, pool))   # = maxpool(relu(y)): ReLU is monotonic, and 1/pool^2 the work
        if timings is not None:
            timings.op[i] += t1 - t0
            timings.layer[i] += time.perf_counter() - t0
    return x


def classifier(f, weights, dtype=np.float32):
    """(B,16,8,8) -> logits (B,10). Flattening is in C,H,W order."""
    h = ref.relu(ref.linear(f.reshape(f.shape[0], -1), weights["fc1.weight"], weights["fc1.bias"], dtype))
    return ref.linear(h, weights["fc2.weight"], weights["fc2.bias"], dtype)


def forward(x, weights, dtype=np.float32, chunk: int = REFERENCE_CHUNK,
            timings: Timings | None = None, progress: bool = False) -> np.ndarray:
    """Logits (B, 10) of images (B, 1, 86, 86) through the numpy reference."""
    if x.ndim != 4 or x.shape[1:] != INPUT_SHAPE:
        raise ValueError(f"LeNet-86 takes images of shape (B, 1, 86, 86), got {x.shape}")
    t0 = time.perf_counter()
    out = np.empty((x.shape[0], 10), dtype=dtype)
    starts = range(0, x.shape[0], chunk)
    if progress:
        from tqdm import tqdm
        starts = tqdm(starts, desc="reference forward", unit="chunk")
    for s in starts:
        out[s:s + chunk] = classifier(features(x[s:s + chunk], weights, dtype, timings), weights, dtype)
    if timings is not None:
        timings.total += time.perf_counter() - t0
    return out


def predict(x, weights, **kw) -> np.ndarray:
    return ref.argmax(forward(x, weights, **kw))
