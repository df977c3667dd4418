"""Where the project's files live: the checkout root and the folders under it, and the cache."""
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS_DIR = ROOT / "kernels"
MILESTONES_DIR = ROOT / "milestones"
BUNDLED_DATA_DIR = ROOT / "datasets" / "fashion-mnist"
SYSTEM_DATA_DIR = Path("/usr/share/datasets/fashion-mnist")
WEIGHTS_FILE = ROOT / "datasets" / "lenet86" / "weights.npz"


def cache_dir() -> Path:
    """$CONVNET_CACHE, else $XDG_CACHE_HOME/convnet, else ~/.cache/convnet."""
    if os.environ.get("CONVNET_CACHE"):
        return Path(os.environ["CONVNET_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "convnet"


def device_cache_file(kind: str, device_name: str) -> Path:
    """<cache>/<kind>/<device name as a file name>.json: per-device measurements (autotune, roofline)."""
    return cache_dir() / kind / (re.sub(r"[^A-Za-z0-9]+", "_", device_name).strip("_") + ".json")
