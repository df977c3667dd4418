"""Load, check and save the LeNet-86 weights (a .npz of float32 arrays)."""
from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import numpy as np

from .errors import WeightsError
from .paths import WEIGHTS_FILE

# name -> shape. Convolutions carry no bias (the network was trained that way).
LENET86_SHAPES = {
    "conv1.weight": (4, 1, 7, 7),
    "conv2.weight": (16, 4, 7, 7),
    "fc1.weight": (128, 1024),
    "fc1.bias": (128,),
    "fc2.weight": (10, 128),
    "fc2.bias": (10,),
}


def check(weights: dict, shapes: dict = LENET86_SHAPES, source: str = "weights") -> dict:
    """Raises WeightsError listing every missing, unexpected, mis-shaped or non-float32 tensor."""
    problems = []
    missing = sorted(set(shapes) - set(weights))
    extra = sorted(set(weights) - set(shapes))
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if extra:
        problems.append(f"unexpected {', '.join(extra)}")
    for name in sorted(set(shapes) & set(weights)):
        arr = weights[name]
        if tuple(arr.shape) != shapes[name]:
            problems.append(f"{name} has shape {tuple(arr.shape)}, expected {shapes[name]}")
        if arr.dtype != np.float32:
            problems.append(f"{name} has dtype {arr.dtype}, expected float32")
        elif not np.all(np.isfinite(arr)):
            problems.append(f"{name} holds NaN or infinite values")
    if problems:
        raise WeightsError(f"{source}: " + "; ".join(problems))
    return weights


def load(path: str | os.PathLike = WEIGHTS_FILE) -> dict[str, np.ndarray]:
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"{path}: weights file not found")
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic[:4] != b"PK\x03\x04":   # an .npz is a zip archive; numpy's own message for other files misleads
        kind = "a single .npy array" if magic == b"\x93NUMPY" else "not a zip archive"
        raise WeightsError(f"{path}: not an .npz weights file ({kind}); expected the archive np.savez writes")
    try:
        with np.load(path, allow_pickle=False) as npz:
            weights = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise WeightsError(f"{path}: not a readable .npz weights file ({e})") from None
    return check(weights, source=str(path))


def save(weights: dict, path: str | os.PathLike) -> str:
    """Writes checked weights; returns the file's sha256."""
    check(weights, source="weights to save")
    np.savez(path, **{k: np.ascontiguousarray(v) for k, v in weights.items()})
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
