"""Compiles, in parallel, every kernel build the LeNet GPU tests and benchmarks ask for (issue #16), so a
fresh GPU machine spends its minutes testing rather than running nvcc one build at a time:

    python tools/precompile.py [workers] [variant,variant,...]

(with variant names: only those variants' builds and the pixel-row cases, for a device call that tests
only them)

The builds are collected by driving the host side through the dry-run recorder: every LeNet variant's
network, every variant x test shape (with the fused pools), the issue-16 shape matrix and the pixel-row
cases. Shapes a strategy refuses are skipped (the tests check those refusals)."""
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test files whose builds it collects

from convnet import catalogue, weights as wio          # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, kernels_of, precompile   # noqa: E402
from convnet.errors import GPUError                  # noqa: E402
from convnet.gpu.conv import make_conv               # noqa: E402
from convnet.gpu.lenet import GPULeNet               # noqa: E402


def collect(only=None) -> set:
    from shapes_matrix import FAST, MATRIX
    from test_gpu_lenet import SHAPES, UPSCALE_CASES
    from test_gpu_conv_shapes import (ASYNC_CASES, LANE_CASES, PX_CASES, PX_VARIANTS, SPLIT_CASES, SPLIT_UPSCALE,
                                      UPSCALE_PX)
    rt = RecordingRuntime()
    w = wio.load()

    def conv(v, wshape, in_shape, name="t", **fused):
        try:
            make_conv(rt, v, np.zeros(wshape, np.float32), in_shape, name, **fused)
        except (GPUError, TypeError):             # refused, or a strategy without that fusion
            pass
    for v in catalogue.load_all().values():
        if not v.needs_gpu or (only and v.name not in only):
            continue
        rt.builds |= kernels_of(lambda r: GPULeNet(v, w, r))       # (cuBLAS stubbed)
        if v.strategy == "cublas":
            continue
        shapes = [*SHAPES.values(), (1, 1, 9, 9, 4, 3)]
        if v.name in FAST:
            shapes += [*MATRIX.values(), (1, 16, 9, 8, 24, 3), (1, 64, 5, 6, 32, 3)]
        for B, C, H, W, M, K in shapes:
            conv(v, (M, C, K, K), (C, H, W))
            if v.params.get("fuse_pool") or v.name == "op_5":
                for pool in (2, 4):
                    conv(v, (M, C, K, K), (C, H, W), pool=pool)
        for n, src, dst, M, K, pool in UPSCALE_CASES.values():
            conv(v, (M, 1, K, K), (1, *dst), "conv1", pool=pool, upscale_from=src)
    for B, C, H, W, M, K, pool in ASYNC_CASES.values():
        conv(catalogue.get("tc_all"), (M, C, K, K), (C, H, W), **({"pool": pool} if pool else {}))
    for B, C, H, W, M, K, pool in SPLIT_CASES.values():         # tc_split's conv_mma builds beside tc_all's
        for name in ("tc_split", "tc_all"):
            conv(catalogue.get(name), (M, C, K, K), (C, H, W), **({"pool": pool} if pool else {}))
    for n, src, dst, M, K in SPLIT_UPSCALE:
        conv(catalogue.get("tc_split"), (M, 1, K, K), (1, *dst), "conv1", pool=2, upscale_from=src)
    lane = dataclasses.replace(catalogue.get("tc_lane"), strategy="mma_px")
    for B, H, W, M, K in LANE_CASES:
        for out_half in (True, False):
            conv(lane, (M, 1, K, K), (1, H, W), pool=2, out_half=out_half)
    for name in PX_VARIANTS:
        px = dataclasses.replace(catalogue.get(name), strategy="mma_px")
        for B, H, W, M, K, pool in PX_CASES.values():
            conv(px, (M, 1, K, K), (1, H, W), pool=pool)
        for src, dst, M, K in UPSCALE_PX:
            conv(catalogue.get(name), (M, 1, K, K), (1, *dst), "conv1", pool=2, upscale_from=src)
    return rt.builds


if __name__ == "__main__":
    builds = collect(set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None)
    t0 = time.time()
    precompile(builds, "sm_90a", int(sys.argv[1]) if len(sys.argv) > 1 else 16)
    print(f"{len(builds)} builds compiled or found in the cache in {time.time() - t0:.0f} s")
