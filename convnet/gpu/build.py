"""Compiles kernels/*.cu to cubins with nvcc, cached on disk, or finds them built ahead of time.

The cache key covers the kernel source, every header in kernels/, the -D constants, the target
architecture and the compiler's version, so a second run starts without compiling. Builds made ahead of
time (`make kernels`, shipped in the wheel: PREBUILT_DIR) are keyed the same way without the compiler's
version, so they serve a machine with another nvcc or none; they are used where the driver runs what
their nvcc made. No CUDA context is needed here: the CPU compile test uses the same function.
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
from ..paths import KERNELS_DIR, PREBUILT_DIR, cache_dir, prepare_cache

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
# compiles that kernel's family alone (gemm.cu holds 14 families; all of them took nvcc ~25 s a build, one 1-18 s).
# A guard may name several families (`#if !KERNEL_SUBSET || KERNELS_A || KERNELS_B`: a piece of code they share); a
# kernel's own guard names one.
_FAMILY_GUARD = re.compile(r"^#if !KERNEL_SUBSET((?: \|\| KERNELS_\w+)+)\s*$", re.M)
_KERNEL = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(')
# a function-like macro that declares a kernel whose name it pastes from its arguments (gemm/v13: BFW_KERNEL(2, 4)
# declares gemm_slab_m##MF##_k##KS##_bf16, i.e. gemm_slab_m2_k4_bf16)
_KERNEL_MACRO = re.compile(r"#define (\w+)\(([\w ,]+)\)((?:[^\n]*\\\n)*[^\n]*)")
_PASTED_KERNEL = re.compile(r'extern "C" __global__ void[\s\\]+'
                            r"(?:(?:__launch_bounds__|__cluster_dims__)\([^)]*\)[\s\\]*)*"
                            r"(\w+(?:##\w+)+)\s*\(([^)]*)\)")


def _guard_families(guard: re.Match) -> list[str]:
    return re.findall(r"KERNELS_\w+", guard.group(1))


def macro_kernels(text: str) -> list[tuple[int, str, list[str]]]:
    """(position of the invocation, kernel name, its declared parameters as written) for every kernel that a
    function-like macro declares per invocation with literal arguments."""
    out = []
    for m in _KERNEL_MACRO.finditer(text):
        e = _PASTED_KERNEL.search(m.group(3))
        if e is None:
            continue
        names = [a.strip() for a in m.group(2).split(",")]
        params = [p.strip().rstrip("\\").strip() for p in e.group(2).split(",")]
        for call in re.finditer(rf"\b{m.group(1)}\(([^()]*)\)", text):
            values = [v.strip() for v in call.group(1).split(",")]
            if len(values) == len(names) and all(v.isdigit() for v in values):
                kernel = "".join(dict(zip(names, values)).get(t, t) for t in e.group(1).split("##"))
                out.append((call.start(), kernel, params))
    return out


_LOCAL_INCLUDE = re.compile(r'^#include "((\w+)/[\w.]+)"\s*$', re.M)


def expanded_text(source: Path) -> str:
    """The file with its pieces in sub-folders of kernels/ (gemm.cu's kernels/gemm/*.cuh) written in place."""
    return _LOCAL_INCLUDE.sub(lambda m: expanded_text(KERNELS_DIR / m.group(1)), source.read_text())


@lru_cache(maxsize=None)
def _families(source: Path, mtime_ns: int, headers: tuple = ()) -> dict:
    """kernel name -> the KERNELS_<FAMILY> switch guarding it, for the kernels of a file that marks families."""
    text = expanded_text(source)
    guards = [(m.start(), _guard_families(m)) for m in _FAMILY_GUARD.finditer(text)]
    out = {}
    # (a kernel declared inside a macro's body reads as "__launch_bounds__" here: macro_kernels names those)
    for at, name in [(m.start(), m.group(1)) for m in _KERNEL.finditer(text) if not m.group(1).startswith("__")] + \
            [(at, name) for at, name, _ in macro_kernels(text)]:
        opened = [g for g_at, g in guards if g_at < at]
        if opened and len(opened[-1]) == 1 and _guard_open(text, at):
            out[name] = opened[-1][0]
    return out


def _guard_open(text: str, at: int) -> bool:
    """Whether the text at `at` lies inside a family guard: #if / #endif pairs after the guard's #if balance."""
    start = text.rfind("#if !KERNEL_SUBSET", 0, at)
    if start < 0:
        return False
    depth = 0
    for d in re.finditer(r"^\s*#\s*(if|ifdef|ifndef|endif)\b", text[start:at], re.M):
        depth += 1 if d.group(1) != "endif" else -1
    return depth > 0


def _other_families_removed(text: str, family: str) -> str | None:
    """The text without the blocks the other families' guards wrap (each guard's #if to its matching #endif); None
    where a guard has an #else or #elif at its own depth (a branch compiled when the guard is off)."""
    out, at = [], 0
    for g in _FAMILY_GUARD.finditer(text):
        if g.start() < at or family in _guard_families(g):
            continue
        depth = 0
        for d in re.finditer(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b", text[g.start():], re.M):
            kind = d.group(1)
            if kind in ("elif", "else") and depth == 1:
                return None
            depth += 1 if kind.startswith("if") else -1 if kind == "endif" else 0
            if depth == 0:
                out.append(text[at:g.start()])
                at = g.start() + d.end()
                break
    return "".join(out) + text[at:]


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@lru_cache(maxsize=None)
def _names_read(source: Path, mtime_ns: int, headers: tuple, family: str | None) -> frozenset:
    """Every identifier in the text a build compiles: the file with its pieces (without the other families' blocks
    when family names one) and every header at the top of kernels/ (a superset of those it includes)."""
    text = expanded_text(source)
    if family:
        text = _other_families_removed(text, family) or text
    names = set(_IDENTIFIER.findall(_COMMENT.sub(" ", text)))
    for header in sorted(KERNELS_DIR.glob("*.cuh")):
        names.update(_IDENTIFIER.findall(_COMMENT.sub(" ", header.read_text())))
    return frozenset(names)


def kernel_defines(kernel_file: str, defines: dict, kernel: str | None = None) -> dict:
    """The -D constants of the build that serves `kernel` of kernel_file: defines, plus KERNEL_SUBSET and the kernel's
    family switch where the file marks families (only that family is compiled); with kernel None the whole file.
    Constants the compiled text never names are left out: a variant's GEMM constants would otherwise make
    transformer.cu, attention.cu or sampling.cu builds, or one GEMM version's family builds (gemm.cu guards each bf16
    piece by the families that use it), that differ in name only."""
    source = KERNELS_DIR / kernel_file
    if not source.is_file():
        raise GPUError(f"kernel source {source} not found")
    mtimes = (source.stat().st_mtime_ns, _headers_mtime())
    family = _families(source, *mtimes).get(kernel) if kernel is not None else None
    used = _names_read(source, *mtimes, family)
    kept = {k: v for k, v in defines.items() if k in used}
    return {**kept, "KERNEL_SUBSET": 1, family: 1} if family else kept


def kernel_cubin(kernel_file: str, defines: dict, kernel: str, arch: str) -> bytes:
    """The cubin of the build that serves `kernel` (kernel_defines), for launches through the driver API."""
    return compile_cubin(kernel_file, kernel_defines(kernel_file, defines, kernel), arch)[0]


def _key(source: Path, flags: list[str], arch: str, compiler: bool = True) -> str:
    h = _sources_hash(source, source.stat().st_mtime_ns, _headers_mtime()).copy()
    h.update(" ".join(flags).encode() + arch.encode() + (nvcc_version().encode() if compiler else b""))
    return h.hexdigest()[:32]


def _headers() -> list:
    """Every header and piece under kernels/ (kernels/gemm/*.cuh too): each is in every build's key."""
    return sorted(KERNELS_DIR.rglob("*.cuh"))


def _headers_mtime() -> tuple:
    return tuple(h.stat().st_mtime_ns for h in _headers())


@lru_cache(maxsize=64)
def _sources_hash(source: Path, mtime_ns: int, headers: tuple):
    """sha256 over the source and every header, read once per file version (gemm.cu is 170 KB; a model asks for
    ~60 keys); each key continues a copy of it."""
    h = hashlib.sha256()
    h.update(source.read_bytes())
    for header in _headers():
        h.update(str(header.relative_to(KERNELS_DIR)).encode() + header.read_bytes())
    return h


# Builds made ahead of time ---------------------------------------------------------------------------------------
MANIFEST = "manifest.json"
_driver_cuda = None         # (major, minor) of the CUDA the driver runs, set by the Runtime; None: not known (no GPU)


def set_driver_cuda(version: int) -> None:
    """The driver's CUDA version as cuDriverGetVersion gives it (13000 = 13.0): prebuilt cubins made by a newer
    nvcc than the driver runs are passed over (compiled here instead)."""
    global _driver_cuda
    _driver_cuda = (version // 1000, version % 1000 // 10)


@lru_cache(maxsize=1)
def prebuilt_manifest() -> dict:
    import json
    try:
        return json.loads((PREBUILT_DIR / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


PTX_TARGET = "compute_80"      # PTX shipped for GPUs newer than the prebuilt cubins' (the driver compiles it)


def sm_of(arch: str) -> int:
    """90 for sm_90a, 100 for sm_100, 80 for compute_80."""
    return int(re.sub(r"\D", "", arch.rsplit("_", 1)[-1]))


def suffix(arch: str) -> str:
    """A build's file type: PTX for a virtual target (compute_XY), a cubin otherwise."""
    return ".ptx" if arch.startswith("compute_") else ".cubin"


def prebuilt_archs(arch: str) -> list[str]:
    """The prebuilt folders a device of `arch` can load: its own, sm_X0's for sm_XY (a cubin runs on later minor
    versions of its major one; sm_90a's only on 9.0), and on GPUs past Hopper the PTX (compiled by the driver)."""
    out = [arch]
    if not arch.endswith("a") and arch[-1] != "0":
        out.append(arch[:-1] + "0")
    if sm_of(arch) >= 100:
        out.append(PTX_TARGET)
    return out


def prebuilt_cubin(kernel_file: str, defines: dict, arch: str) -> tuple[bytes, str] | None:
    """(cubin, ptxas report) of this build from PREBUILT_DIR, or None (not built ahead, or the driver is older than
    the CUDA that built it)."""
    made = prebuilt_manifest()
    if not made or (_driver_cuda is not None and _driver_cuda < tuple(made.get("cuda", (0, 0)))):
        return None
    for a in prebuilt_archs(arch):
        image = PREBUILT_DIR / a / f"{prebuilt_name(kernel_file, defines, a)}{suffix(a)}"
        if image.is_file():
            try:                                 # PTX goes to the driver NUL-terminated
                return image.read_bytes() + (b"\0" if suffix(a) == ".ptx" else b""), image.with_suffix(".log").read_text()
            except OSError:
                return None
    return None


def cache_name(kernel_file: str, defines: dict, arch: str, compiler: bool = True) -> str:
    """The file name (without suffix) of this build in the kernel cache: the source's stem and its key (source,
    headers, flags, arch and, with compiler, nvcc's version)."""
    source = KERNELS_DIR / kernel_file
    return f"{source.stem}-{_key(source, [*BASE_FLAGS, *define_flags(defines)], arch, compiler)}"


def prebuilt_name(kernel_file: str, defines: dict, arch: str) -> str:
    """The file name (without suffix) of this build in PREBUILT_DIR/<arch>: the cache's key without the compiler."""
    return cache_name(kernel_file, defines, arch, compiler=False)


def cached(kernel_file: str, defines: dict, arch: str, prebuilt: bool = True) -> bool:
    """Whether this build loads without nvcc: prebuilt (unless prebuilt=False), or in this machine's cache."""
    if prebuilt and prebuilt_cubin(kernel_file, defines, arch) is not None:
        return True
    if nvcc_path() is None:
        return False
    name = cache_name(kernel_file, defines, arch)
    return (cubin_dir() / f"{name}{suffix(arch)}").is_file() and (cubin_dir() / f"{name}.log").is_file()


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


SPAWN_TRIES = 3


def _run_nvcc(cmd: list, kernel_file: str):
    """nvcc's completed process. Starting it can fail for a moment while memory is short (fork: EFAULT, EAGAIN,
    ENOMEM, seen beside a test holding a 56-megapixel picture): tried SPAWN_TRIES times, then one GPUError line."""
    import time
    for attempt in range(SPAWN_TRIES):
        try:
            return subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            if attempt == SPAWN_TRIES - 1:
                raise GPUError(f"could not start nvcc for {kernel_file}: {e.strerror or e}") from None
            time.sleep(0.5 * (attempt + 1))


def compile_cubin(kernel_file: str, defines: dict, arch: str, verbose: bool = False,
                  out_dir: Path | None = None, prebuilt: bool = True) -> tuple[bytes, str]:
    """(cubin bytes, ptxas report) of kernels/<kernel_file> under the given -D constants: built ahead of time
    (unless prebuilt=False, verbose or out_dir is given), else cached in out_dir (default: cubin_dir(), read at each
    call), else compiled now."""
    source = KERNELS_DIR / kernel_file
    if not source.is_file():
        raise GPUError(f"kernel source {source} not found")
    if prebuilt and not verbose and out_dir is None:
        found = prebuilt_cubin(kernel_file, defines, arch)
        if found is not None:
            return found
    flags = [*BASE_FLAGS, *define_flags(defines)]
    name = cache_name(kernel_file, defines, arch)
    out_dir = out_dir or cubin_dir()
    cubin, log = out_dir / f"{name}{suffix(arch)}", out_dir / f"{name}.log"
    if cubin.is_file() and log.is_file() and not verbose:
        return cubin.read_bytes(), log.read_text()
    if nvcc_path() is None:
        raise GPUError("nvcc not found: the CUDA toolkit is needed to build the kernels")
    _count_compiled(out_dir)
    tmp = cubin.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    kind = ["-ptx"] if suffix(arch) == ".ptx" else ["-cubin", "-Xptxas", "-v"]
    cmd = [nvcc_version() and nvcc_path(), *kind, f"-arch={arch}", *flags, "-I", str(KERNELS_DIR), "-o", str(tmp),
           str(source)]
    p = _run_nvcc(cmd, kernel_file)
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
