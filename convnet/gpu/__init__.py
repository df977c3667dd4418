"""The GPU backend (PyCUDA). Importing this package does not touch CUDA; `available()` says
whether the GPU path can run here, and why not."""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """(True, device name) where PyCUDA imports and sees a device, else (False, reason)."""
    try:
        import pycuda.driver as drv
    except ImportError:
        if not _nvidia_driver_present():
            return False, "no NVIDIA GPU here"
        return False, f"an NVIDIA GPU is present but PyCUDA is not installed ({_pycuda_hint()})"
    try:
        drv.init()
        if drv.Device.count() == 0:
            return False, "no CUDA device found"
        return True, drv.Device(0).name()
    except drv.Error as e:
        return False, f"CUDA unavailable ({e})"


def _nvidia_driver_present() -> bool:
    """Whether this host has an NVIDIA driver (a GPU), judged without CUDA: its kernel module or nvidia-smi."""
    import os
    import shutil
    return os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None


def _pycuda_hint() -> str:
    """How to add PyCUDA to this install: the checkout's editable extra, or the installed package's."""
    from ..paths import BUNDLED_IN_PACKAGE
    return "pip install pycuda, with the CUDA toolkit's nvcc and cuda.h" if BUNDLED_IN_PACKAGE.is_dir() \
        else "make GPU=1, or pip install -e '.[gpu]' with the CUDA toolkit"


@lru_cache(maxsize=1)
def compute_capability() -> int:
    """Device 0's compute capability x 10 (90 on an H100/H200), 0 where no GPU is usable."""
    ok, _ = available()
    if not ok:
        return 0
    import pycuda.driver as drv
    major, minor = drv.Device(0).compute_capability()
    return 10 * major + minor


def describe() -> dict:
    """Device 0 for a results file: {"name", "driver", "compute_capability"}; {} where no GPU is usable."""
    ok, name = available()
    if not ok:
        return {}
    import re
    import pycuda.driver as drv
    v = drv.get_driver_version()             # e.g. 13000 = CUDA 13.0, the newest CUDA the driver supports
    try:                                     # the kernel module's version, e.g. 580.159.04 (Linux)
        with open("/proc/driver/nvidia/version") as f:
            found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", f.read())
        driver = found.group(1) if found else "unknown"
    except OSError:
        driver = "unknown"
    return {"name": name, "driver": driver, "driver_cuda": f"{v // 1000}.{v % 1000 // 10}",
            "compute_capability": f"{compute_capability() / 10:.1f}"}
