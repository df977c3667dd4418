"""Session 25, call 5: decode_attention_bf16 (and _gap) builds of test_gpu_bf16's decode tests, compiled in parallel:
`python precompile_c5.py 16 sm_90a` (CONVNET_CACHE as the tests')."""
import sys

from convnet.bench.dryrun import RecordingRuntime, precompile_main


def collect(arch: str) -> set:
    rt = RecordingRuntime()
    rt.arch = arch
    for D in (16, 32, 64, 128):
        for extra in ({"PDL": 0}, {"PDL": 1}, {"PDL": 1, "PDL_EARLY": 1}):
            rt.kernel("attention.cu", "decode_attention_bf16", {"HEAD_DIM": D, **extra}, "test")
    return rt.builds


if __name__ == "__main__":
    sys.exit(precompile_main(collect))
