"""Kernels built before they are needed.

A model asks for its builds one at a time as it is constructed; compiled there, each waits for the one before
(fast_bf16: 61 builds, minutes on one core). `ensure` runs the model's host-side set-up once on the recorder
first, then compiles the builds that are neither built ahead of time nor in the cache, all at once on every core,
saying what it compiles and about how long it will take. `make kernels` (python -m convnet.gpu.ahead) builds the
current catalogue for the common shapes into PREBUILT_DIR, which the wheel carries."""
from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from ..errors import GPUError
from . import build
from .recorder import entries_of

SECONDS_PER_BUILD = 2.5        # one nvcc run over a kernel family on one core, on average (1-18 s)
GPT2_WIDTHS = {"124M": (768, 12), "medium": (1024, 16), "large": (1280, 20), "xl": (1600, 25)}
ARCHS = ("sm_90a", "sm_80", build.PTX_TARGET)


def missing(builds, arch: str, prebuilt: bool = True) -> list:
    return sorted(b for b in builds if not build.cached(b[0], dict(b[1]), arch, prebuilt))


def compile_all(builds, arch: str, what: str, workers: int | None = None, quiet: bool = False) -> float:
    """Compiles the (kernel file, defines) builds on every core with a progress bar; returns the seconds taken."""
    from tqdm import tqdm
    builds = sorted(builds)
    workers = max(1, min(workers or os.cpu_count() or 1, len(builds) or 1))
    if not builds:
        return 0.0
    if build.nvcc_path() is None:
        raise GPUError(f"{len(builds)} kernel builds for {what} are not built ahead of time for {arch} and nvcc is "
                       f"not found: install the CUDA toolkit (nvcc), or a package built with make kernels")
    if not quiet:
        guess = SECONDS_PER_BUILD * -(-len(builds) // workers)
        print(f"compiling {len(builds)} kernel builds for {what} ({arch}) on {workers} cores, about {guess:.0f} s, "
              f"once: they are cached in {build.cubin_dir()}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool, \
            tqdm(total=len(builds), desc="nvcc", unit=" build", file=sys.stderr, leave=False,
                 disable=quiet or None) as bar:
        for _ in pool.map(lambda b: build.compile_cubin(b[0], dict(b[1]), arch, prebuilt=False), builds):
            bar.update(1)
    return time.perf_counter() - t0


def ensure(make, arch: str, what: str) -> None:
    """Compiles in parallel the builds make(runtime) asks for that are not there yet (make runs on the recorder:
    host-side set-up only, no CUDA)."""
    try:
        todo = missing(entries_of(make, arch), arch)
    except Exception:     # noqa: BLE001  what the recorder cannot set up, the real construction reports in its words
        return
    compile_all(todo, arch, what)


# The builds the engine ships --------------------------------------------------------------------------------------
def _gpu_arch(arch: str) -> str:
    """The runtime arch whose builds a target serves: compute_80 (PTX for newer GPUs) is asked for what sm_80 runs."""
    return arch.replace("compute_", "sm_")


def lenet_builds(arch: str) -> set:
    from .. import catalogue, weights as wio
    from .lenet import GPULeNet
    sm = build.sm_of(arch)
    w = wio.load()
    out = set()
    for v in catalogue.load_all().values():
        if v.needs_gpu and v.min_sm <= sm:
            out |= set(entries_of(lambda r: GPULeNet(v, w, r), _gpu_arch(arch)))
    return out


def onnx_builds(arch: str) -> set:
    """The ONNX path's builds: its kernels take every shape as an argument, so one trivial network names them all."""
    from .. import catalogue
    from ..cnn.gpu import GPUNet
    from ..cnn.graph import Graph, Layer
    sm = build.sm_of(arch)
    net = Graph([Layer("flatten", ["x"], "y", "flatten")], "x", (1, 4, 4), "y", {})
    out = set()
    for v in catalogue.load_all("onnx").values():
        if v.needs_gpu and v.min_sm <= sm:
            out |= set(entries_of(lambda r: GPUNet(net, v, r), _gpu_arch(arch)))
    return out


def gpt2_dry_model(config):
    """A stand-in for `config` with the same builds: they depend on the head size and the width only (every GPT-2
    width of head size 64 shares them but for the dataflow decode kernel's slot size at large's and xl's; checked by
    tests/test_prebuilt_kernels.py), so one layer and a 64-token vocabulary on random weights."""
    from ..gpt2.model import GPT2Config
    small = GPT2Config(1, config.n_head, config.n_embd, 64, config.n_ctx)
    return _dry_params(small), small


@lru_cache(maxsize=4)
def _dry_params(config) -> dict:
    from ..gpt2.model import random_params
    return random_params(config)


def gpt2_builds(arch: str, widths=GPT2_WIDTHS.values()) -> set:
    """The current GPT-2 variants' builds, dry-run at each GPT-2 width: one set but for the dataflow decode kernel,
    whose slots are larger at large's and xl's widths (dataflow.slot_bytes)."""
    import numpy as np
    from .. import catalogue
    from ..gpt2.gpu import GPT2GPU
    from ..gpt2.gpu_generate import GPUGenerator
    from ..gpt2.model import GPT2Config
    sm = build.sm_of(arch)
    out = set()
    with np.errstate(all="ignore"):
        for C, H in widths:
            params, config = gpt2_dry_model(GPT2Config(1, H, C, 64, 1024))
            for v in catalogue.load_all("gpt2").values():
                if v.needs_gpu and v.min_sm <= sm:
                    out |= set(entries_of(lambda r: GPUGenerator(GPT2GPU(params, config, v, r)), _gpu_arch(arch)))
    return out


def build_ahead(archs=ARCHS, workers: int | None = None) -> dict:
    """make kernels: the current catalogue's builds for the common shapes, compiled where missing and copied into
    PREBUILT_DIR/<arch>/ under keys without the compiler's version (compute_80: PTX of the variants that run on
    sm_80, for GPUs newer than both cubin targets); the manifest says what made them."""
    import re
    out = build.PREBUILT_DIR
    summary = {"cuda": [int(x) for x in re.search(r"release (\d+)\.(\d+)", build.nvcc_version()).groups()],
               "nvcc": build.nvcc_version().strip().splitlines()[-1], "archs": {}}
    if build.prebuilt_manifest().get("nvcc") == summary["nvcc"]:       # other archs built before stay listed
        summary["archs"] = {a: s for a, s in build.prebuilt_manifest().get("archs", {}).items() if a not in archs}
    t0 = time.perf_counter()
    for arch in archs:
        builds = lenet_builds(arch) | gpt2_builds(arch) | onnx_builds(arch)
        # against the cache alone: each build is read back from there below, so none may be left to compile one by one
        seconds = compile_all(missing(builds, arch, prebuilt=False), arch, f"the current catalogue ({len(builds)} builds)", workers)
        folder = out / arch
        folder.mkdir(parents=True, exist_ok=True)
        keep = set()
        for f, d in sorted(builds):
            data, log = build.compile_cubin(f, dict(d), arch, prebuilt=False)
            name = build.prebuilt_name(f, dict(d), arch)
            keep.add(name)
            target = folder / f"{name}{build.suffix(arch)}"
            if not target.is_file() or target.read_bytes() != data:
                tmp = target.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, target)
                (folder / f"{name}.log").write_text(log)
        for stale in folder.glob(f"*{build.suffix(arch)}"):   # builds of sources or catalogues that changed since
            if stale.stem not in keep:
                stale.unlink()
                stale.with_suffix(".log").unlink(missing_ok=True)
        size = sum(p.stat().st_size for p in folder.iterdir())
        summary["archs"][arch] = {"builds": len(builds), "bytes": size, "compile_s": round(seconds, 1)}
    tmp = out / f"{build.MANIFEST}.tmp"
    tmp.write_text(json.dumps(summary, indent=1) + "\n")
    os.replace(tmp, out / build.MANIFEST)
    build.prebuilt_manifest.cache_clear()
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    return summary


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m convnet.gpu.ahead",
                                description="Build the current catalogue's kernels ahead of time (make kernels).")
    p.add_argument("--arch", default=",".join(ARCHS), help="comma list of targets (default: %(default)s)")
    p.add_argument("--workers", type=int, default=None, help="nvcc processes at once (default: one per core)")
    args = p.parse_args(argv)
    if build.nvcc_path() is None:
        print("make kernels: nvcc not found, nothing built (kernels compile at first use where nvcc is)")
        return 0
    s = build_ahead(tuple(a for a in args.arch.split(",") if a), args.workers)
    for arch, a in s["archs"].items():
        print(f"{arch}: {a['builds']} builds, {a['bytes'] / 2**20:.1f} MB, compiled {a['compile_s']:.0f} s "
              f"-> {build.PREBUILT_DIR / arch}")
    print(f"kernels built ahead of time in {s['seconds']:.0f} s ({s['nvcc']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
