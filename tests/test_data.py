import errno
import gzip
import os
import struct

import numpy as np
import pytest

from convnet import data
from convnet.errors import DataError


def write_idx(path, arr, magic_dtype=0x08, dims=None, compress=True):
    dims = arr.ndim if dims is None else dims
    payload = struct.pack(">HBB", 0, magic_dtype, dims) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()
    path.write_bytes(gzip.compress(payload) if compress else payload)
    return path


def test_bundled_test_split():
    raw = data.load_raw("test")
    assert raw.images.shape == (10000, 28, 28) and raw.images.dtype == np.uint8
    assert raw.labels.shape == (10000,)
    assert np.bincount(raw.labels).tolist() == [1000] * 10


def test_read_idx_roundtrip(tmp_path, rng):
    arr = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    np.testing.assert_array_equal(data.read_idx(write_idx(tmp_path / "a.gz", arr), ndim=3), arr)
    np.testing.assert_array_equal(data.read_idx(write_idx(tmp_path / "a", arr, compress=False), ndim=3), arr)


@pytest.mark.parametrize("damage,message", [
    ("missing", "file not found"),
    ("magic", "bad IDX magic"),
    ("dtype", "data type 0x0d"),
    ("dims", "2 dimensions, expected 3"),
    ("short_data", "truncated or corrupt"),
    ("cut_gzip", "corrupt or truncated gzip"),
    ("not_gzip", "corrupt or truncated gzip"),
    ("tiny", "too short"),
])
def test_read_idx_names_the_problem(tmp_path, rng, damage, message):
    arr = rng.integers(0, 256, (4, 28, 28), dtype=np.uint8)
    p = tmp_path / "images.gz"
    if damage == "magic":
        p.write_bytes(gzip.compress(b"\x12\x34\x08\x03" + bytes(100)))
    elif damage == "dtype":
        write_idx(p, arr, magic_dtype=0x0D)
    elif damage == "dims":
        write_idx(p, arr.reshape(4, 784), dims=2)
    elif damage == "short_data":
        payload = gzip.decompress(write_idx(p, arr).read_bytes())
        p.write_bytes(gzip.compress(payload[:-10]))
    elif damage == "cut_gzip":
        blob = write_idx(p, arr).read_bytes()
        p.write_bytes(blob[: len(blob) // 2])
    elif damage == "not_gzip":
        p.write_bytes(b"this is not gzip at all")
    elif damage == "tiny":
        p.write_bytes(gzip.compress(b"\x00\x00"))
    with pytest.raises(DataError, match=message) as e:
        data.read_idx(p, ndim=3)
    assert "images.gz" in str(e.value)


def test_load_raw_checks_directory_and_counts(tmp_path, rng):
    with pytest.raises(DataError, match="data directory not found"):
        data.load_raw("test", tmp_path / "nope")
    with pytest.raises(DataError, match="file not found"):
        data.load_raw("test", tmp_path)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (3, 28, 28), dtype=np.uint8))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([1, 2], np.uint8))
    with pytest.raises(DataError, match="3 images but .* 2 labels"):
        data.load_raw("test", tmp_path)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([1, 2, 12], np.uint8))
    with pytest.raises(DataError, match="label 12 out of range"):
        data.load_raw("test", tmp_path)


def test_upscale_matches_documented_skimage_call(rng):
    from skimage.transform import resize
    imgs = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    out = data.upscale(imgs)
    assert out.shape == (3, 1, 86, 86) and out.dtype == np.float32
    for i in range(3):
        want = resize(imgs[i] / 255.0, (86, 86), order=1, mode="reflect", anti_aliasing=False)
        np.testing.assert_allclose(out[i, 0], want, atol=1e-7)
    assert 0.0 <= out.min() and out.max() <= 1.0


@pytest.fixture
def small_split(tmp_path, rng, monkeypatch):
    monkeypatch.setenv("CONVNET_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "src"
    src.mkdir()
    write_idx(src / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (6, 28, 28), dtype=np.uint8))
    write_idx(src / "t10k-labels-idx1-ubyte.gz", rng.integers(0, 10, 6).astype(np.uint8))
    return src


def _cache_files(tmp_path):
    return sorted((tmp_path / "cache").glob("fashion-*.npy"))


def test_cache_is_reused(small_split, tmp_path, monkeypatch):
    first, _ = data.load("test", small_split)
    assert len(_cache_files(tmp_path)) == 1
    monkeypatch.setattr(data, "upscale", lambda imgs: pytest.fail("cache not used"))
    second, _ = data.load("test", small_split)
    np.testing.assert_array_equal(first, second)


def test_corrupt_cache_is_rebuilt(small_split, tmp_path):
    first, _ = data.load("test", small_split)
    (npy,) = _cache_files(tmp_path)
    blob = bytearray(npy.read_bytes())
    blob[-20:] = bytes(20)                                   # flip the last pixels: digest no longer matches
    npy.write_bytes(bytes(blob))
    second, _ = data.load("test", small_split)
    np.testing.assert_array_equal(first, second)
    npy.write_bytes(b"garbage")                              # unreadable: rebuilt too
    third, _ = data.load("test", small_split)
    np.testing.assert_array_equal(first, third)


def test_cache_key_follows_sources_and_parameters(small_split, tmp_path, monkeypatch, rng):
    data.load("test", small_split)
    monkeypatch.setitem(data.RESIZE_PARAMS, "order", 3)
    data.load("test", small_split)
    assert len(_cache_files(tmp_path)) == 2
    write_idx(small_split / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (6, 28, 28), dtype=np.uint8))
    data.load("test", small_split)
    assert len(_cache_files(tmp_path)) == 3


def test_limit_and_label_dtype(small_split):
    x, y = data.load("test", small_split, limit=4)
    assert x.shape == (4, 1, 86, 86) and y.dtype == np.int64


def _no_leftovers(folder):
    return sorted(p.name for p in folder.rglob("*") if ".tmp" in p.name)


def test_cache_path_is_a_file_warns_once_and_runs(small_split, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("CONVNET_CACHE", str(blocker))
    monkeypatch.setattr(data, "_warned_cache", set())
    want = data.upscale(data.load_raw("test", small_split).images)
    for _ in range(2):
        x, _ = data.load("test", small_split)
        np.testing.assert_array_equal(x, want)
    err = capsys.readouterr().err
    assert err.count("warning: data cache") == 1 and "a file is in the way" in err
    assert "Traceback" not in err and blocker.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_cache_warns_and_runs(small_split, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o500)
    monkeypatch.setattr(data, "_warned_cache", set())
    try:
        x, _ = data.load("test", small_split)
    finally:
        cache.chmod(0o700)
    assert x.shape == (6, 1, 86, 86)
    assert "warning: data cache" in capsys.readouterr().err
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize("fails", ["array", "digest"])
def test_full_disk_leaves_no_temporary_file(small_split, tmp_path, monkeypatch, capsys, fails):
    """A write that fails half-way (ENOSPC) leaves neither the partial file nor an orphan behind."""
    def full_disk(path, *args, **kw):
        with open(path, "wb") as f:
            f.write(b"\x93NUMPY partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(data, "_warned_cache", set())
    if fails == "array":
        monkeypatch.setattr(data.np, "save", full_disk)
    else:
        real_write_text = type(tmp_path).write_text
        def write_text(self, text, *args, **kw):
            if self.name.endswith(".tmp.json"):
                full_disk(self)
            return real_write_text(self, text, *args, **kw)
        monkeypatch.setattr(type(tmp_path), "write_text", write_text)
    x, _ = data.load("test", small_split)
    assert x.shape == (6, 1, 86, 86)
    cache = tmp_path / "cache"
    assert _no_leftovers(cache) == [] and list(cache.glob("fashion-*")) == []
    err = capsys.readouterr().err
    assert err.count("warning: data cache") == 1 and "No space left on device" in err


def test_a_small_batch_preprocesses_only_its_images(tmp_path, monkeypatch):
    """--batch 50 on a fresh cache upscales 50 images and writes no 300 MB cache file; with the whole split cached,
    the same 50 come from it."""
    from convnet import data
    monkeypatch.setenv("CONVNET_CACHE", str(tmp_path))
    calls = []
    real = data.upscale
    monkeypatch.setattr(data, "upscale", lambda images: calls.append(len(images)) or real(images))
    x, labels = data.load("test", limit=50)
    assert x.shape == (50, 1, 86, 86) and labels.shape == (50,) and calls == [50]
    assert not list(tmp_path.glob("fashion-*.npy"))
    raw = data.load_raw("test")
    np.testing.assert_array_equal(x, real(raw.images[:50]))
