"""Compiles on the CPU machine the attention.cu builds of the lead's split_decode_finish check (session 12): the
kernel-level cases of test_gpu_decode_split.py and test_gpu_attention_split_bf16.py and sanitize_split_finish.py.

    CONVNET_CACHE=$PWD/build/f12scache .venv/bin/python milestones/results/2026-11-23-s12/lead/precompile_split.py 2 sm_90a"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpt2.decode_split import SplitDecode                    # noqa: E402


def collect(arch: str) -> set:
    from precompile_decode_split import TUNABLES
    rt = RecordingRuntime()
    for D in (16, 32, 64, 80, 128):
        for d in TUNABLES if D in (64, 80) else TUNABLES[:1]:
            SplitDecode(rt, D, d, "test")
    for D in (64, 80):
        SplitDecode(rt, D, {"PDL": 1}, "test")
    for D in (16, 32, 48, 64, 96, 128):
        SplitDecode(rt, D, {}, "test", bf16=True)
    for D in (64, 96):
        for d in TUNABLES[1:]:
            SplitDecode(rt, D, d, "test", bf16=True)
        SplitDecode(rt, D, {"PDL": 1}, "test", bf16=True)
    for d in ({"PDL": 1}, {"PDL": 1, "PDL_EARLY": 1}):
        SplitDecode(rt, 64, d, "test", bf16=True)
    return rt.builds


if __name__ == "__main__":
    precompile_main(collect)
