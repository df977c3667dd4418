"""The kernel builds of session 12's LeNet device call (2x H200: the --devices stream, test_multi_gpu_device,
tc_lane_st's GPU tests with it as main, the --compare), compiled on the CPU into $CONVNET_CACHE and packed:

    cp -r build/l11cache build/l12cache      # seed: session 11's LeNet cubins (same keys where sources match)
    CONVNET_CACHE=$PWD/build/l12cache .venv/bin/python milestones/results/2026-11-23-s12/lenet/precompile_s12.py 2 pack

(pack: write build/l12cache.tar.xz with only these cubins)."""
import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))

from convnet import catalogue, weights as wio                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, kernels_of, precompile   # noqa: E402
from convnet.errors import GPUError                                  # noqa: E402
from convnet.gpu import build                                        # noqa: E402
from convnet.gpu.conv import make_conv                               # noqa: E402
from convnet.gpu.lenet import GPULeNet                               # noqa: E402
from convnet.gpu.multi import pipelined                              # noqa: E402


def collect() -> set:
    from test_gpu_lenet import SHAPES
    from test_gpu_conv_shapes import PX_CASES, UPSCALE_PX
    rt, w = RecordingRuntime(), wio.load()

    def conv(v, wshape, in_shape, name="t", **fused):
        try:
            make_conv(rt, v, np.zeros(wshape, np.float32), in_shape, name, **fused)
        except (GPUError, TypeError):
            pass
    for name in ("tc_lane_hv", "tc_lane_st", "tc_conv1", "fused_head"):
        v = catalogue.get(name)
        rt.builds |= kernels_of(lambda r: GPULeNet(v, w, r))
        rt.builds |= kernels_of(lambda r: GPULeNet(pipelined(v, 10000), w, r))
    st = catalogue.get("tc_lane_st")
    for B, C, H, W, M, K in SHAPES.values():
        conv(st, (M, C, K, K), (C, H, W))
        for pool in (2, 4):
            conv(st, (M, C, K, K), (C, H, W), pool=pool)
    for B, H, W, M, K, pool in PX_CASES.values():
        conv(dataclasses.replace(st, strategy="mma_px"), (M, 1, K, K), (1, H, W), pool=pool)
    for src, dst, M, K in UPSCALE_PX:
        conv(st, (M, 1, K, K), (1, *dst), "conv1", pool=2, upscale_from=src)
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
