"""Your own network: an ONNX file on a variant of milestones/onnx.toml, and the pictures it classifies.

    from convnet.cnn.model import Model
    net = Model("mynet.onnx")                # variant "auto": the GPU path where there is one, else the numpy reference
    logits = net.logits(x)                   # x: (N, C, H, W) float32, already normalised

`convnet-predict photos/ --model mynet.onnx --labels labels.txt --mean 0.5 --std 0.25` reads pictures (and .npy
arrays) through `prepare`: resized to the model's input size and channels, scaled to [0, 1], then (x - mean) / std
per channel, mean 0 and std 1 unless given or in the model's metadata (keys mean, std: comma lists; labels: one per
line or comma list)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataError, UsageError
from . import graph as cg, reference


class Model:
    def __init__(self, path, variant: str = "auto"):
        from ..runner import resolve_variant
        self.graph = cg.load(path)
        self.variant = resolve_variant(variant, "onnx")
        self.gpu = None
        self.device = "CPU (numpy)"
        if self.variant.needs_gpu:
            from .gpu import GPUNet
            self.gpu = GPUNet(self.graph, self.variant)
            self.device = self.gpu.rt.name

    @property
    def input_shape(self) -> tuple:
        return tuple(self.graph.input_shape)

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The network's output for x (N, C, H, W)."""
        x = np.asarray(x, np.float32)
        if x.ndim != 4 or x.shape[1:] != self.input_shape:
            raise UsageError(f"input of shape {x.shape}, the model takes (N, {', '.join(map(str, self.input_shape))})")
        return self.gpu.forward(x) if self.gpu is not None else reference.forward(self.graph, x)


def channel_values(text, what: str, channels: int, meta: dict) -> np.ndarray:
    """--mean / --std: one value or one per channel; else the model's metadata; else 0 / 1."""
    raw = text if text is not None else meta.get(what)
    if raw is None:
        return np.full(channels, 0.0 if what == "mean" else 1.0, np.float32)
    try:
        vals = np.array([float(v) for v in str(raw).replace(",", " ").split()], np.float32)
    except ValueError:
        raise UsageError(f"--{what} {raw!r}: numbers expected (one, or one per channel)") from None
    if vals.size not in (1, channels) or not np.isfinite(vals).all() or (what == "std" and (vals <= 0).any()):
        raise UsageError(f"--{what} {raw!r}: one finite value or {channels} (one per channel)"
                         + (", all positive" if what == "std" else ""))
    return np.broadcast_to(vals, (channels,)).astype(np.float32)


def labels(path, meta: dict, classes: int) -> list[str]:
    """Class names: --labels FILE (one per line), else the metadata's labels, else the class indices."""
    if path is not None:
        try:
            names = [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()]
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--labels {path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    elif meta.get("labels"):
        text = meta["labels"]
        names = [s.strip() for s in (text.splitlines() if "\n" in text else text.split(","))]
    else:
        return [str(i) for i in range(classes)]
    if len(names) != classes:
        raise UsageError(f"--labels: {len(names)} names for a model with {classes} outputs")
    return names


def _resized_maps(a: np.ndarray, c: int, h: int, w: int) -> np.ndarray | None:
    """An array of the model's c channels (c not 1 or 3; (c, H, W) or (H, W, c)) as (c, h, w) in [0, 1], each
    channel resized bilinearly in float (PIL mode F); None for another array."""
    from PIL import Image
    if a.ndim != 3 or c in (1, 3) or c not in (a.shape[0], a.shape[-1]):
        return None
    if a.shape[-1] != c:                                         # (c, H, W) -> (H, W, c)
        a = np.moveaxis(a, 0, -1)
    a = a.astype(np.float32) / (255.0 if a.dtype == np.uint8 else 1.0)
    if a.shape[:2] == (h, w):
        return np.moveaxis(a, -1, 0)
    return np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(a[..., k]), mode="F").resize((w, h),
                                                                                              Image.BILINEAR))
                     for k in range(c)])


def prepare(images: list, shape: tuple, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Pictures (PIL images, or arrays (H, W) / (H, W, C) / (C, H, W)) as the model's input batch; for a model of
    other than 1 or 3 channels, arrays of its channel count."""
    from PIL import Image
    c, h, w = shape
    out = np.empty((len(images), c, h, w), np.float32)
    for n, img in enumerate(images):
        maps = None if isinstance(img, Image.Image) else _resized_maps(np.asarray(img), c, h, w)
        if maps is not None:
            out[n] = maps
            continue
        if not isinstance(img, Image.Image):
            a = np.asarray(img)
            if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[-1] not in (1, 3):
                a = np.moveaxis(a, 0, -1)                        # (C, H, W) -> (H, W, C)
            a = a.astype(np.float32) / (255.0 if a.dtype == np.uint8 else 1.0)
            if a.ndim == 3 and a.shape[-1] == 1:
                a = a[..., 0]
            img = Image.fromarray(np.clip(a * 255.0, 0, 255).round().astype(np.uint8))
        img = img.convert("L" if c == 1 else "RGB")
        if img.size != (w, h):
            img = img.resize((w, h), Image.BILINEAR)
        a = np.asarray(img, np.float32) / 255.0
        a = a[None] if c == 1 else np.moveaxis(a, -1, 0)
        if c not in (1, 3):
            raise DataError(f"the model takes {c} channels; pictures give 1 (grey) or 3 (RGB), and arrays may hold "
                            f"{c} (N x {c} x H x W or N x H x W x {c})")
        out[n] = a
    return (out - mean[None, :, None, None]) / std[None, :, None, None]


def softmax(z: np.ndarray) -> np.ndarray:
    """Probabilities from the model's outputs (kept as they are where each row already sums to 1)."""
    z = np.asarray(z, np.float64)
    if (z >= 0).all() and np.allclose(z.sum(axis=1), 1, atol=1e-4):
        return z
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
