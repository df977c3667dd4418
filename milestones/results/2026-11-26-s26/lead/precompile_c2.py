"""Session 26, call 2: call 1's builds (precompile_c1) plus test_gpu_gpt2.py's wide-head flash tiles (head sizes 96 to
256) and decode_attention at 160, 192 and 256, compiled in parallel: `python precompile_c2.py 16 sm_90a`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

import precompile_c1                                                       # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main        # noqa: E402


def collect(arch: str) -> set:
    import test_gpu_gpt2 as t
    from convnet.gpt2.flash import FlashAttention
    rt = RecordingRuntime()
    rt.arch = arch
    for D in (96, 128, 160, 256):
        for tile in t.WIDE_TILES.values():
            FlashAttention(rt, D, {}, "test", **tile)
    for D in (160, 192, 256):
        rt.kernel("attention.cu", "decode_attention", {"HEAD_DIM": D}, "test")
    return rt.builds | precompile_c1.collect(arch)


if __name__ == "__main__":
    sys.exit(precompile_main(collect))
