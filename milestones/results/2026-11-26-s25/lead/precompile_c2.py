"""Session 25, call 2: the attention builds the changed tests and bench-attention run (flash_attention_bf16 with
FB_LEAN 0 / 1, its tiles and head sizes; the fp32 flash kernels and decode_attention at head sizes 96 and 128), compiled
in parallel before the tests: `python precompile_c2.py 16 sm_90a` (CONVNET_CACHE as the tests')."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402


def collect(arch: str) -> set:
    from convnet.bench.gpt2 import FLASH_BF16_BENCH
    from convnet.gpt2.flash import FlashAttention, FlashAttentionBF16
    from convnet.gpu.gemm import Gemm
    import test_gpu_bf16 as tb
    import test_gpu_gpt2 as tg
    rt = RecordingRuntime()
    rt.arch = arch
    for D in (16, 32, 64, 128):
        FlashAttentionBF16(rt, D, {}, "test")
    for tile in tb.BF16_TILES.values():
        FlashAttentionBF16(rt, 64, {}, "test", **tile)
    for D, kw, defines in tb.FB_LEAN_TILES.values():
        for lean in ({"FB_LEAN": 0}, {}):
            FlashAttentionBF16(rt, D, {**defines, **lean}, "test", **kw)
    FlashAttentionBF16(rt, 64, {"FB_PDL": 1}, "test")
    for cfg in FLASH_BF16_BENCH.values():
        FlashAttentionBF16(rt, 64, cfg.get("defines", {}), "bench", **{k: v for k, v in cfg.items() if k != "defines"})
    b = rt.pool.get("x", (1,))
    for tile in tg.WIDE_TILES.values():
        for D in (96, 128):
            fa = FlashAttention(rt, D, {}, "test", **tile)
            for Tq, Tk in ((1, 300), (17, 17)):
                fa(b, b, b, b, 1, 2, Tq, Tk, Tq, Tk, 0)
    for D in (32, 64, 80, 96, 128):
        rt.kernel("attention.cu", "decode_attention", {"HEAD_DIM": D}, "test")
    Gemm(rt, "regtile", {}, "bench")
    rt.kernel("attention.cu", "softmax_rows_warp", {}, "bench")
    return rt.builds


if __name__ == "__main__":
    precompile_main(collect)
