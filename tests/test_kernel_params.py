"""tma.kernel_params (session 25), the driver launches' argument packing: each argument's bytes as _c_arg (the general
path) packs them, for numpy scalars of every kind the launchers pass, device arrays, tensor maps and Python numbers."""
import ctypes

import numpy as np

from convnet.gpu import tma


class _DeviceArray:                    # what a PyCUDA GPUArray shows a launch: its address
    gpudata = 0x7F00_1234_5600


def test_kernel_params_pack_every_argument_as_the_general_path():
    args = [np.uintp(2**40 + 8), _DeviceArray(), np.int32(-7), np.int32(768), np.int64(-(1 << 33)),
            np.uint32(2**32 - 1), np.uint64(2**63 + 5), np.float32(0.1), np.float64(-2.5e-300), np.uintp(0),
            bytes(range(128)), 3, 2.5, np.float32("nan")]
    holders, params = tma.kernel_params(args)
    assert len(holders) == len(params) == len(args)
    for a, h, p in zip(args, holders, params):
        want = tma._c_arg(a)
        assert type(h) is type(want), a
        assert p == ctypes.addressof(h)
        assert ctypes.string_at(p, ctypes.sizeof(want)) == bytes(want), a
