"""Fashion-MNIST: IDX reading with validation, 28->86 preprocessing, and its on-disk cache.

Preprocessing (GPU kernels that upscale must reproduce exactly this):
    pixels  uint8 0..255  ->  float32 in [0, 1] by x / 255
    resize  skimage.transform.resize(img, (86, 86), order=1 (bilinear), mode="reflect",
            anti_aliasing=False, preserve_range=True), computed in float64, stored as float32.
    Bilinear with half-pixel centres: source coordinate = (dst + 0.5) * 28/86 - 0.5,
    out-of-range neighbours mirrored by "reflect" (numpy "symmetric" semantics in scipy's ndimage).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import struct
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DataError
from .paths import BUNDLED_DATA_DIR, SYSTEM_DATA_DIR, cache_dir, prepare_cache

SRC_SIZE = 28
DST_SIZE = 86
RESIZE_PARAMS = {"size": DST_SIZE, "order": 1, "mode": "reflect", "anti_aliasing": False,
                 "scale": "x/255", "compute": "float64", "store": "float32"}
CACHE_VERSION = 1

SPLIT_FILES = {
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
}
IDX_UBYTE = 0x08
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def _read_gzip(path: Path) -> bytes:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path}: corrupt or truncated gzip stream ({e})") from None


def read_idx(path: str | os.PathLike, ndim: int) -> np.ndarray:
    """Reads an IDX file of unsigned bytes with `ndim` dimensions, checking every header field."""
    path = Path(path)
    raw = _read_gzip(path) if path.suffix == ".gz" else _read_plain(path)
    if len(raw) < 4:
        raise DataError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    zero, dtype, dims = struct.unpack(">HBB", raw[:4])
    if zero != 0:
        raise DataError(f"{path}: bad IDX magic number 0x{int.from_bytes(raw[:4], 'big'):08x}")
    if dtype != IDX_UBYTE:
        raise DataError(f"{path}: IDX data type 0x{dtype:02x}, expected unsigned byte 0x08")
    if dims != ndim:
        raise DataError(f"{path}: {dims} dimensions, expected {ndim}")
    header = 4 + 4 * dims
    if len(raw) < header:
        raise DataError(f"{path}: truncated IDX header")
    shape = struct.unpack(f">{dims}I", raw[4:header])
    expected = int(np.prod(shape, dtype=np.int64))
    got = len(raw) - header
    if got != expected:
        raise DataError(f"{path}: header promises {expected} bytes of data for shape {shape}, "
                        f"file holds {got} (truncated or corrupt)")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _read_plain(path: Path) -> bytes:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    return path.read_bytes()


def default_data_dir(split: str) -> Path:
    return BUNDLED_DATA_DIR if split == "test" else SYSTEM_DATA_DIR


@dataclass(frozen=True)
class RawSplit:
    images: np.ndarray   # (N, 28, 28) uint8
    labels: np.ndarray   # (N,) uint8
    sources: tuple[Path, Path]


def load_raw(split: str = "test", data_dir: str | os.PathLike | None = None) -> RawSplit:
    if split not in SPLIT_FILES:
        raise DataError(f"unknown split {split!r} (expected one of {sorted(SPLIT_FILES)})")
    root = Path(data_dir) if data_dir is not None else default_data_dir(split)
    if not root.is_dir():
        hint = " (install Debian's dataset-fashion-mnist or pass --data-dir)" if split == "train" else ""
        raise DataError(f"{root}: data directory not found{hint}")
    img_path, lbl_path = (root / name for name in SPLIT_FILES[split])
    images = read_idx(img_path, ndim=3)
    labels = read_idx(lbl_path, ndim=1)
    if images.shape[1:] != (SRC_SIZE, SRC_SIZE):
        raise DataError(f"{img_path}: images are {images.shape[1:]}, expected 28x28")
    if images.shape[0] != labels.shape[0]:
        raise DataError(f"{img_path} holds {images.shape[0]} images but {lbl_path} holds "
                        f"{labels.shape[0]} labels")
    if labels.size and labels.max() > 9:
        raise DataError(f"{lbl_path}: label {labels.max()} out of range 0..9")
    return RawSplit(images, labels, (img_path, lbl_path))


def upscale(images: np.ndarray) -> np.ndarray:
    """(N, 28, 28) uint8 -> (N, 1, 86, 86) float32, the documented preprocessing, image by image."""
    from skimage.transform import resize
    out = np.empty((images.shape[0], 1, DST_SIZE, DST_SIZE), dtype=np.float32)
    for i, img in enumerate(images):
        out[i, 0] = resize(img.astype(np.float64) / 255.0, (DST_SIZE, DST_SIZE), order=1,
                           mode="reflect", anti_aliasing=False, preserve_range=True)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _cache_key(raw: RawSplit) -> str:
    meta = {"v": CACHE_VERSION, "params": RESIZE_PARAMS,
            "sources": [_sha256(p) for p in raw.sources]}
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:24]


def _digest(arr: np.ndarray) -> str:
    return hashlib.blake2b(arr.tobytes(), digest_size=16).hexdigest()


def preprocessed(raw: RawSplit, use_cache: bool = True, progress: bool = False, limit: int | None = None) -> np.ndarray:
    """The upscaled images of `raw` (the first `limit`), from the cache when its key and content check out. The
    cache holds the whole split: it is written only when the whole split is asked for, and a smaller `limit`
    without it upscales just those images. A cache folder that cannot be written (a file in the way, read-only,
    full disk) costs one warning, never the run."""
    n = raw.images.shape[0] if limit is None else min(limit, raw.images.shape[0])
    if not use_cache:
        return _upscale_with_progress(raw.images[:n], progress)
    key = _cache_key(raw)
    npy = cache_dir() / f"fashion-{key}.npy"
    meta = npy.with_suffix(".json")
    cached = _load_cache(npy, meta, raw.images.shape[0]) if npy.is_file() else None
    if cached is not None:
        return cached[:n]
    arr = _upscale_with_progress(raw.images[:n], progress)
    if n == raw.images.shape[0]:
        _save_cache(arr, npy, meta)
    return arr


def _save_cache(arr: np.ndarray, npy: Path, meta: Path) -> None:
    """Writes the array and its digest through temporary files renamed into place (unique names: concurrent
    runs must not collide); on failure they are removed, and the run goes on without the cache."""
    tmp = npy.with_suffix(f".{os.getpid()}.tmp.npy")
    tmp_meta = meta.with_suffix(f".{os.getpid()}.tmp.json")
    placed = []
    try:
        prepare_cache()
        np.save(tmp, arr)
        tmp_meta.write_text(json.dumps({"digest": _digest(arr), "shape": list(arr.shape)}))
        os.replace(tmp, npy)
        placed.append(npy)                           # without its digest file it is useless: removed below
        os.replace(tmp_meta, meta)
    except OSError as e:
        for leftover in (tmp, tmp_meta, *placed):
            try:
                leftover.unlink(missing_ok=True)
            except OSError:
                pass
        _warn_cache_unusable(npy.parent, e)


_warned_cache: set = set()


def _warn_cache_unusable(folder: Path, e: OSError) -> None:
    """One warning per folder and process, however many loads fail to cache."""
    if str(folder) in _warned_cache:
        return
    _warned_cache.add(str(folder))
    in_the_way = isinstance(e, (FileExistsError, NotADirectoryError))
    why = "a file is in the way" if in_the_way else (e.strerror or str(e))
    print(f"warning: data cache {folder} is not usable ({why}); running without the disk cache "
          "(set CONVNET_CACHE to a writable folder to keep the preprocessed images)", file=sys.stderr)


def _load_cache(npy: Path, meta: Path, n: int) -> np.ndarray | None:
    """Returns the cached array, or None when it is missing or fails its checks (then rebuilt)."""
    try:
        if not (npy.is_file() and meta.is_file()):
            return None
        info = json.loads(meta.read_text())
        arr = np.load(npy, allow_pickle=False)
    except (OSError, ValueError, EOFError):          # OSError includes a folder we may not read
        return None
    if arr.shape != (n, 1, DST_SIZE, DST_SIZE) or arr.dtype != np.float32:
        return None
    if info.get("digest") != _digest(arr):
        return None
    return arr


def _upscale_with_progress(images: np.ndarray, progress: bool) -> np.ndarray:
    if not progress:
        return upscale(images)
    from tqdm import tqdm
    chunks = []
    for start in tqdm(range(0, len(images), 1000), desc="upscale 28->86", unit="kimg"):
        chunks.append(upscale(images[start:start + 1000]))
    return np.concatenate(chunks) if chunks else upscale(images)


def load(split: str = "test", data_dir=None, limit: int | None = None,
         use_cache: bool = True, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(images (N,1,86,86) float32, labels (N,) int64) of a split, the first `limit` of them."""
    raw = load_raw(split, data_dir)
    x = preprocessed(raw, use_cache=use_cache, progress=progress, limit=limit)
    return x, raw.labels[:len(x)].astype(np.int64)
