"""Session 25, call 4: the fp32 / TF32 flash builds of test_gpu_gpt2's FLASH_TILES (head sizes 32, 64, 80) and of
bench-attention's FLASH_BENCH, compiled in parallel: `python precompile_c4.py 16 sm_90a` (CONVNET_CACHE as the run's)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402


def collect(arch: str) -> set:
    from convnet.bench.gpt2 import FLASH_BENCH
    from convnet.gpt2.flash import FlashAttention
    from convnet.gpu.gemm import Gemm
    import test_gpu_gpt2 as tg
    rt = RecordingRuntime()
    rt.arch = arch
    for tile in tg.FLASH_TILES.values():
        for D in (32, 64, 80):
            FlashAttention(rt, D, {}, "test", **tile)
    for cfg in FLASH_BENCH.values():
        FlashAttention(rt, 64, {}, "bench", **cfg)
    Gemm(rt, "regtile", {}, "bench")
    rt.kernel("attention.cu", "softmax_rows_warp", {}, "bench")
    return rt.builds


if __name__ == "__main__":
    precompile_main(collect)
