"""Compiles kernels/*.cu to cubins with nvcc, cached on disk.

The cache key covers the kernel source, every header in kernels/, the -D constants, the target
architecture and the compiler's version, so a second run starts without compiling. No CUDA context
is needed here: the CPU compile test uses the same function.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from ..errors import GPUError
from ..paths import KERNELS_DIR, cache_dir, prepare_cache

BASE_FLAGS = ("-O3", "-std=c++17")


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for cand in ("/usr/local/cuda/bin/nvcc",):
        if os.path.exists(cand):
            return cand
    return None


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    nvcc = nvcc_path()
    if nvcc is None:
        raise GPUError("nvcc not found: the CUDA toolkit is needed to build the kernels")
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout


def define_flags(defines: dict) -> list[str]:
    return [f"-D{k}={int(v) if isinstance(v, bool) else v}" for k, v in sorted(defines.items())]


# A kernel file may wrap each kernel in `#if !KERNEL_SUBSET || KERNELS_<FAMILY>`: a build asked for one kernel then
# compiles that kernel's family alone (gemm.cu holds 13 families; all of them took nvcc ~25 s a build, one 1-18 s).
_FAMILY_GUARD = re.compile(r"^#if !KERNEL_SUBSET \|\| (KERNELS_\w+)\s*$", re.M)
_KERNEL = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(')


@lru_cache(maxsize=None)
def _families(source: Path, mtime_ns: int) -> dict:
    """kernel name -> the KERNELS_<FAMILY> switch guarding it, for the kernels of a file that marks families."""
    text = source.read_text()
    guards = [(m.start(), m.group(1)) for m in _FAMILY_GUARD.finditer(text)]
    out = {}
    for m in _KERNEL.finditer(text):
        opened = [g for at, g in guards if at < m.start()]
        if opened and text.rfind("#endif", 0, m.start()) < text.rfind("#if !KERNEL_SUBSET", 0, m.start()):
            out[m.group(1)] = opened[-1]
    return out


def kernel_defines(kernel_file: str, defines: dict, kernel: str | None = None) -> dict:
    """The -D constants of the build that serves `kernel` of kernel_file: defines, plus KERNEL_SUBSET and the kernel's
    family switch where the file marks families (only that family is compiled); defines as given otherwise."""
    if kernel is None:
        return dict(defines)
    source = KERNELS_DIR / kernel_file
    if not source.is_file():
        raise GPUError(f"kernel source {source} not found")
    family = _families(source, source.stat().st_mtime_ns).get(kernel)
    return {**defines, "KERNEL_SUBSET": 1, family: 1} if family else dict(defines)


def kernel_cubin(kernel_file: str, defines: dict, kernel: str, arch: str) -> bytes:
    """The cubin of the build that serves `kernel` (kernel_defines), for launches through the driver API."""
    return compile_cubin(kernel_file, kernel_defines(kernel_file, defines, kernel), arch)[0]


def _key(source: Path, flags: list[str], arch: str) -> str:
    h = hashlib.sha256()
    h.update(source.read_bytes())
    for header in sorted(KERNELS_DIR.glob("*.cuh")):
        h.update(header.name.encode() + header.read_bytes())
    h.update(" ".join(flags).encode() + arch.encode() + nvcc_version().encode())
    return h.hexdigest()[:32]


_progress_lock = threading.Lock()
_progress = None            # a tqdm counter of the cubins compiled in this process, opened at the first one


def _count_compiled(where: Path) -> None:
    """Shows first-time compilation (about 140 cubins for the whole GPU test suite: minutes on 2 cores) as a
    progress line instead of a silent pause."""
    global _progress
    with _progress_lock:
        if _progress is None:
            from tqdm import tqdm
            _progress = tqdm(desc=f"compiling CUDA kernels once (cached in {where})", unit=" cubin",
                             file=sys.stderr, leave=False, disable=None)
        _progress.update(1)


def cubin_dir() -> Path:
    """<cache>/cubin where it can be written; otherwise (a file in the way, read-only, full disk) a temporary
    folder for this process, with one warning."""
    return _usable_cubin_dir(cache_dir() / "cubin")


@lru_cache(maxsize=None)
def _usable_cubin_dir(out: Path) -> Path:
    try:
        prepare_cache("cubin")                 # = out: the marked cache's cubin/ (cubin_dir passes cache_dir()/cubin)
        with tempfile.TemporaryFile(dir=out):
            pass
        return out
    except OSError as e:
        tmp = Path(tempfile.mkdtemp(prefix="convnet-cubin-"))
        print(f"warning: kernel cache {out} is not usable ({e.strerror or e}); compiling into {tmp} for this run",
              file=sys.stderr)
        return tmp


def compile_cubin(kernel_file: str, defines: dict, arch: str, verbose: bool = False,
                  out_dir: Path | None = None) -> tuple[bytes, str]:
    """(cubin bytes, ptxas report) of kernels/<kernel_file> under the given -D constants, cached in out_dir
    (default: cubin_dir(), read at each call)."""
    source = KERNELS_DIR / kernel_file
    if not source.is_file():
        raise GPUError(f"kernel source {source} not found")
    flags = [*BASE_FLAGS, *define_flags(defines)]
    key = _key(source, flags, arch)
    out_dir = out_dir or cubin_dir()
    cubin, log = out_dir / f"{source.stem}-{key}.cubin", out_dir / f"{source.stem}-{key}.log"
    if cubin.is_file() and log.is_file() and not verbose:
        return cubin.read_bytes(), log.read_text()
    _count_compiled(out_dir)
    tmp = cubin.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    cmd = [nvcc_version() and nvcc_path(), "-cubin", f"-arch={arch}", "-Xptxas", "-v", *flags,
           "-I", str(KERNELS_DIR), "-o", str(tmp), str(source)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise GPUError(f"nvcc failed on {kernel_file} with {' '.join(define_flags(defines))}:\n{p.stderr.strip()}")
    data = tmp.read_bytes()
    try:                    # the cache is an optimisation: a full disk costs a recompile next time, not the run
        os.replace(tmp, cubin)
        log.write_text(p.stderr)
    except OSError:
        for f in (tmp, cubin, log):
            f.unlink(missing_ok=True)
    return data, p.stderr
