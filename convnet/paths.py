"""Where the project's files live, and the cache.

The top-level folders kernels/, milestones/ and datasets/ are the project's layout in a checkout. A wheel
carries copies of them inside the package, as convnet/_bundled/<folder> (setup.py's build step puts them
there), so that nothing else in site-packages named `kernels` or `datasets` can collide. `bundled()` finds
a folder either way: the packaged copy where there is one, else the checkout's."""
import os
import re
import shutil
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_IN_PACKAGE = PACKAGE_DIR / "_bundled"
CHECKOUT_ROOT = PACKAGE_DIR.parent
BUNDLED_FOLDERS = ("kernels", "milestones", "datasets")


def bundled(folder: str) -> Path:
    """The installed copy of one of BUNDLED_FOLDERS, or the checkout's (editable install, or no install)."""
    if folder not in BUNDLED_FOLDERS:
        raise ValueError(f"{folder!r} is not one of {BUNDLED_FOLDERS}")
    installed = BUNDLED_IN_PACKAGE / folder
    return installed if installed.is_dir() else CHECKOUT_ROOT / folder


KERNELS_DIR = bundled("kernels")
MILESTONES_DIR = bundled("milestones")
BUNDLED_DATA_DIR = bundled("datasets") / "fashion-mnist"
WEIGHTS_FILE = bundled("datasets") / "lenet86" / "weights.npz"
SYSTEM_DATA_DIR = Path("/usr/share/datasets/fashion-mnist")
# Kernels built ahead of time (make kernels): the wheel's copy, else the checkout's build/kernels (git-ignored).
PREBUILT_DIR = (BUNDLED_IN_PACKAGE / "prebuilt") if (BUNDLED_IN_PACKAGE / "prebuilt").is_dir() \
    else CHECKOUT_ROOT / "build" / "kernels"


def cache_dir() -> Path:
    """$CONVNET_CACHE, else $XDG_CACHE_HOME/convnet, else ~/.cache/convnet. It holds the preprocessed test
    split (fashion-*.npy, ~300 MB), compiled kernels (cubin/, ~300 MB after the whole GPU test suite) and per-device
    measurements (autotune/, roofline/)."""
    if os.environ.get("CONVNET_CACHE"):
        return Path(os.environ["CONVNET_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "convnet"


# The cache folder's own entries: what clear_cache may delete. The marker says the project made (or adopted) the
# folder; without it nothing is deleted, whatever CONVNET_CACHE names.
CACHE_MARKER = ".convnet-cache"
CACHE_SUBFOLDERS = ("cubin", "autotune", "roofline")
CACHE_FILE_PATTERNS = ("fashion-*.npy", "fashion-*.json", "fashion-*.tmp.*")


def _own_entry(entry: Path) -> bool:
    return entry.name == CACHE_MARKER or (entry.name in CACHE_SUBFOLDERS and entry.is_dir() and not entry.is_symlink()) \
        or (entry.is_file() and not entry.is_symlink() and any(entry.match(p) for p in CACHE_FILE_PATTERNS))


def prepare_cache(sub: str | None = None) -> Path:
    """cache_dir() (or its sub-folder `sub`), created if missing, with the marker written where the project made the
    folder or where it holds nothing but the project's entries. Raises OSError where it cannot be made."""
    root = cache_dir()
    if not (root / CACHE_MARKER).is_file():
        root.mkdir(parents=True, exist_ok=True)
        if all(_own_entry(e) for e in root.iterdir()):
            (root / CACHE_MARKER).write_text("This folder is convnet's cache: `convnet --clear-cache` empties it.\n")
    if sub is None:
        return root
    (root / sub).mkdir(exist_ok=True)
    return root / sub


def clear_cache() -> tuple[Path, int]:
    """Deletes the cache's own entries (CACHE_SUBFOLDERS, CACHE_FILE_PATTERNS, the marker), then the folder if nothing
    else is left in it; returns (its path, the bytes removed). Refuses, deleting nothing, where the folder has no
    marker; a file that cannot be removed is one line (UsageError)."""
    from .errors import UsageError
    root = cache_dir()
    if not root.exists():
        return root, 0
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder, so not a convnet cache: nothing removed (check CONVNET_CACHE)")
    if not (root / CACHE_MARKER).is_file():
        raise UsageError(f"{root} has no {CACHE_MARKER} marker, so convnet did not make it: nothing removed "
                         f"(check CONVNET_CACHE; to delete the folder anyway, remove it by hand)")
    size = 0
    try:
        own = [e for e in root.iterdir() if _own_entry(e) and e.name != CACHE_MARKER]
        for entry in own:
            files = [entry] if entry.is_file() else [f for f in entry.rglob("*") if f.is_file() and not f.is_symlink()]
            size += sum(f.stat().st_size for f in files)
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        if not root.is_symlink() and all(e.name == CACHE_MARKER for e in root.iterdir()):
            (root / CACHE_MARKER).unlink()
            root.rmdir()
    except OSError as e:
        raise UsageError(f"cannot clear the cache {root}: {e.strerror or e}"
                         f"{f' ({e.filename})' if getattr(e, 'filename', None) else ''}") from None
    return root, size


def device_cache_file(kind: str, device_name: str) -> Path:
    """<cache>/<kind>/<device name as a file name>.json: per-device measurements (autotune, roofline)."""
    return cache_dir() / kind / (re.sub(r"[^A-Za-z0-9]+", "_", device_name).strip("_") + ".json")
