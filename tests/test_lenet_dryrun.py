"""The host side of LeNet-86's GPU pipeline, driven through the dry-run runtime (no GPU): every launch of
every variant passes as many arguments as its kernel declares and has a valid grid, and each fusion
step of issue #4 really removes the kernels it claims to (the resize, the pools, the FC round trips)."""
import numpy as np
import pytest

from convnet import catalogue
from helpers import declared_arity

GPU_VARIANTS = [v for v in catalogue.load_all(archive=True).values() if v.needs_gpu and v.strategy != "cublas"]


def launches(variant, weights, n):
    """(kernel, grid, block, argument count) of one single-stream chunk of n images."""
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.lenet import GPULeNet
    rt = RecordingRuntime()
    net = GPULeNet(variant, weights, rt)
    rt.launches.clear()                                     # weight uploads, constant copies
    shape = (n, *net.input_shape)
    x_host = np.zeros(shape, net.input_dtype)
    net._enqueue(x_host, np.zeros((n, 10), np.float32), np.zeros(n, np.int32), 0, n, 0, None, None)
    return rt.launches


@pytest.mark.parametrize("n", [1, 37, 10000])
@pytest.mark.parametrize("variant", GPU_VARIANTS, ids=[v.name for v in GPU_VARIANTS])
def test_every_launch_matches_its_kernel(variant, n, lenet_weights):
    arity = declared_arity()
    recorded = launches(variant, lenet_weights, n)
    assert recorded
    for name, grid, block, nargs in recorded:
        assert nargs == arity[name], f"{name}: {nargs} arguments, the kernel declares {arity[name]}"
        assert 1 <= grid[0] < 2**31 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535, (name, grid)
        assert 1 <= block[0] * block[1] * block[2] <= 1024, (name, block)


@pytest.mark.parametrize("name,kernels", [
    ("fused_pool_u8", ["upscale_u8", "conv_direct", "conv_direct", "gemm_regtile", "gemm_regtile", "argmax_rows"]),
    ("fused_up", ["conv_direct", "conv_direct", "gemm_regtile", "gemm_regtile", "argmax_rows"]),
    ("fused_head", ["conv_direct", "conv_direct", "fc_head"]),
    ("tc_fused", ["conv_direct", "conv_mma_f16", "fc_head"]),
    ("tc_conv1", ["conv_px_mma", "conv_mma_f16", "fc_head"]),
    ("tc_fused12", ["conv_px_mma", "fc_head_mma"]),          # conv1 + conv2 in one kernel (FUSE_CONV2)
    ("op_5_tc", ["conv_mma_f16", "relu_maxpool", "conv_mma_f16", "relu_maxpool", "gemm_regtile", "gemm_regtile",
                 "argmax_rows"]),
])
def test_fusion_steps_launch_only_their_kernels(name, kernels, lenet_weights):
    assert [k for k, *_ in launches(catalogue.get(name), lenet_weights, 100)] == kernels


def test_zero_copy_hands_the_pinned_arrays_to_the_kernels(lenet_weights, monkeypatch):
    """tc_lane_zc: conv1 gets the input array's own address and the head the result arrays' (unified
    addressing: a pinned buffer's host pointer is its device pointer); nothing is copied; a variant without
    uint8 input is refused in one line."""
    import dataclasses
    from convnet.gpu import recorder as dryrun
    from convnet.gpu.lenet import GPULeNet
    copies, seen = [], []
    real = dryrun._Kernel.__call__

    def record(self, grid, block, *args, **kw):
        seen.append((self.name, args))
        return real(self, grid, block, *args, **kw)
    monkeypatch.setattr(dryrun._Buf, "set_async", lambda self, *a, **k: copies.append("up"))
    monkeypatch.setattr(dryrun._Buf, "get_async", lambda self, *a, **k: copies.append("down"))
    monkeypatch.setattr(dryrun._Kernel, "__call__", record)
    net = GPULeNet(catalogue.get("tc_lane_zc"), lenet_weights, dryrun.RecordingRuntime())
    x, z, p = np.zeros((37, 28, 28), np.uint8), np.zeros((37, 10), np.float32), np.zeros(37, np.int32)
    copies.clear()
    net._enqueue(x, z, p, 0, 37, 0, None, None)
    assert copies == []
    assert [int(a[0]) for k, a in seen if k == "conv_px_mma"] == [x.ctypes.data]
    assert [(int(a[5]), int(a[6])) for k, a in seen if k.startswith("fc_head")] == [(z.ctypes.data, p.ctypes.data)]
    v = catalogue.get("op_5_tc")
    with pytest.raises(ValueError, match="zero_copy needs uint8 input"):
        GPULeNet(dataclasses.replace(v, params={**v.params, "zero_copy": True}), lenet_weights,
                 dryrun.RecordingRuntime())


def test_bad_fusion_settings_are_clear_errors():
    """Checked on the host before any kernel exists: each names the problem."""
    import dataclasses
    from convnet.errors import GPUError
    from convnet.gpu.conv import make_conv
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.ops import FCHead
    rt = RecordingRuntime()
    w1 = np.zeros((4, 1, 7, 7), np.float32)
    fused = catalogue.get("fused_up")
    with pytest.raises(GPUError, match="one input channel"):
        make_conv(rt, fused, np.zeros((4, 2, 7, 7), np.float32), (2, 86, 86), "conv1", pool=2, upscale_from=(28, 28))
    with pytest.raises(GPUError, match="px_small_m must be 1 or a multiple of 4"):
        make_conv(rt, dataclasses.replace(fused, params={**fused.params, "px_small_m": 3}), w1, (1, 86, 86), "conv1")
    with pytest.raises(GPUError, match="pools 2x2 or 4x4"):
        make_conv(rt, catalogue.get("tc_fused"), np.zeros((16, 4, 7, 7), np.float32), (4, 40, 40), "conv2", pool=3)
    with pytest.raises(GPUError, match="inconsistent shapes"):
        FCHead(rt, "t", np.zeros((128, 1024)), np.zeros(128), np.zeros((10, 64)), np.zeros(10), {})
    with pytest.raises(GPUError, match="at most 32 classes"):
        FCHead(rt, "t", np.zeros((128, 1024)), np.zeros(128), np.zeros((40, 128)), np.zeros(40), {})
