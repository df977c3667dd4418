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


def cache_dir() -> Path:
    """$CONVNET_CACHE, else $XDG_CACHE_HOME/convnet, else ~/.cache/convnet. It holds the preprocessed test
    split (fashion-*.npy, ~300 MB), compiled kernels (cubin/, ~300 MB after the whole GPU test suite) and per-device
    measurements (autotune/, roofline/)."""
    if os.environ.get("CONVNET_CACHE"):
        return Path(os.environ["CONVNET_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "convnet"


def clear_cache() -> tuple[Path, int]:
    """Deletes the cache folder; returns (its path, the bytes it held)."""
    root = cache_dir()
    if not root.is_dir():
        return root, 0
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and not f.is_symlink())
    shutil.rmtree(root)
    return root, size


def device_cache_file(kind: str, device_name: str) -> Path:
    """<cache>/<kind>/<device name as a file name>.json: per-device measurements (autotune, roofline)."""
    return cache_dir() / kind / (re.sub(r"[^A-Za-z0-9]+", "_", device_name).strip("_") + ".json")
