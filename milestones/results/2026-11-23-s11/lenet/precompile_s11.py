"""The kernel builds of session 11's LeNet device call (measure_issue16.sh s11tests s11san s11bench with its
default -k), compiled on the CPU into $CONVNET_CACHE and packed for the call:

    CONVNET_CACHE=$PWD/build/l11cache python milestones/results/2026-11-23-s11/lenet/precompile_s11.py 2 [pack]

(pack: write build/l11cache.tar.xz with only these cubins). Narrower than tests/precompile.py (which builds
every variant's whole test matrix): tc_split's network and test shapes (plain and pooled), the split conv
cases beside tc_all's, tc_lane_st's pixel-row cases, and the networks the --compare runs."""
import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from convnet import catalogue, weights as wio                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, kernels_of, precompile   # noqa: E402
from convnet.errors import GPUError                                  # noqa: E402
from convnet.gpu import build                                        # noqa: E402
from convnet.gpu.conv import make_conv                               # noqa: E402
from convnet.gpu.lenet import GPULeNet                               # noqa: E402


def collect() -> set:
    from test_gpu_lenet import SHAPES
    from test_gpu_conv_shapes import PX_CASES, SPLIT_CASES, SPLIT_UPSCALE, UPSCALE_PX
    rt, w = RecordingRuntime(), wio.load()

    def conv(v, wshape, in_shape, name="t", **fused):
        try:
            make_conv(rt, v, np.zeros(wshape, np.float32), in_shape, name, **fused)
        except (GPUError, TypeError):
            pass
    for name in ("tc_split", "tc_split_zc", "tc_split_dyn", "tc_fused12", "tc_fused12_zco", "tc_lane_st", "tc_lane_zco",
                 "tc_lane_hv", "fused_head"):
        v = catalogue.get(name)
        rt.builds |= kernels_of(lambda r: GPULeNet(v, w, r))
    sp = catalogue.get("tc_split")
    for B, C, H, W, M, K in SHAPES.values():
        conv(sp, (M, C, K, K), (C, H, W))
        for pool in (2, 4):
            conv(sp, (M, C, K, K), (C, H, W), pool=pool)
    for B, C, H, W, M, K, pool in SPLIT_CASES.values():
        for name in ("tc_split", "tc_all"):
            conv(catalogue.get(name), (M, C, K, K), (C, H, W), **({"pool": pool} if pool else {}))
    for n, src, dst, M, K in SPLIT_UPSCALE:
        for v in (sp, catalogue.get("tc_split_dyn")):
            conv(v, (M, 1, K, K), (1, *dst), "conv1", pool=2, upscale_from=src)
    # call 2's layer sweeps of tc_split (measure_issue16.sh s11sweep)
    from convnet.bench.layer import settings, with_setting
    for grid, wshape, in_shape, fused in [
            ({"px_dyn_xs": [0, 1], "px_warp_rows": [8, 16], "px_min_blocks": [3, 4]}, (4, 1, 7, 7), (1, 86, 86),
             {"pool": 2, "upscale_from": (28, 28)}),
            ({"WARP_ROWS": [4, 8], "MIN_BLOCKS": [2, 3]}, (16, 4, 7, 7), (4, 40, 40), {"pool": 4, "out_half": False})]:
        for s in settings(grid):
            conv(with_setting(sp, s), wshape, in_shape, "conv1" if wshape[1] == 1 else "conv2", **fused)
    from test_gpu_conv_shapes import FUSED12_CASES                   # tc_fused12's fused conv1 + conv2
    for n, src, dst, M, K, M2, K2 in FUSED12_CASES.values():
        conv(catalogue.get("tc_fused12"), (M, 1, K, K), (1, *dst), "conv1", pool=2, upscale_from=src,
             fuse_conv2=(np.zeros((M2, M, K2, K2), np.float32), 4))
    from bench_f12 import GRID                                       # bench_f12.py sweep: tc_fused12's settings
    for s in GRID:
        rt.builds |= kernels_of(lambda r, v=with_setting(catalogue.get("tc_fused12"), s): GPULeNet(v, w, r))
    st = catalogue.get("tc_lane_st")
    for B, H, W, M, K, pool in PX_CASES.values():
        conv(dataclasses.replace(st, strategy="mma_px"), (M, 1, K, K), (1, H, W), pool=pool)
    for src, dst, M, K in UPSCALE_PX:
        conv(st, (M, 1, K, K), (1, *dst), "conv1", pool=2, upscale_from=src)
    for k1, n1, n2 in [(1024, 128, 10), (96, 48, 7)]:              # the head tests' builds (v1, STAGE_OUT)
        from convnet.gpu.ops import FCHeadMma
        for d in ({}, {"STAGE_OUT": 1}):
            FCHeadMma(rt, "t", np.zeros((n1, k1)), np.zeros(n1), np.zeros((n2, n1)), np.zeros(n2), d)
    return rt.builds


if __name__ == "__main__":
    builds = collect()
    precompile(builds, "sm_90a", int(sys.argv[1]) if len(sys.argv) > 1 else 2)
    print(f"{len(builds)} builds compiled or found in {build.cubin_dir()}")
    if sys.argv[2:] == ["pack"]:
        names = []
        for f, d in sorted(builds):
            key = build._key(build.KERNELS_DIR / f, [*build.BASE_FLAGS, *build.define_flags(dict(d))], "sm_90a")
            names += [f"cubin/{Path(f).stem}-{key}.{ext}" for ext in ("cubin", "log")]
        cache = build.cubin_dir().parent
        out = ROOT / "build" / f"{cache.name}.tar.xz"
        subprocess.run(["tar", "-C", str(cache.parent), "-cJf", str(out), *(f"{cache.name}/{n}" for n in names)],
                       check=True)
        print(f"packed {len(names) // 2} builds into {out} ({out.stat().st_size / 2**20:.1f} MiB)")
