"""convnet-bench gemv without a GPU: the shapes it times and what it refuses (one line, exit code 2)."""
import subprocess
import sys

import pytest


def test_the_shapes_are_gpt2_groups():
    from convnet.bench.gemv import shapes_of
    assert shapes_of("124M") == {"qkv": (2304, 768), "attn_proj": (768, 768), "mlp_fc": (3072, 768),
                                 "mlp_proj": (768, 3072), "lm_head": (50304, 768)}
    assert shapes_of("xl") == {"qkv": (4800, 1600), "attn_proj": (1600, 1600), "mlp_fc": (6400, 1600),
                               "mlp_proj": (1600, 6400)}


@pytest.mark.parametrize("args,message", [(["--variant", "fast"], "a bf16 GPT-2 variant is needed"),
                                          (["--rows", "9"], "the GEMV takes 1 to 8 rows"),
                                          (["--variant", "nope"], "nope")])
def test_what_it_cannot_run_is_one_line(args, message):
    out = subprocess.run([sys.executable, "-m", "convnet.bench.cli", "gemv", *args], capture_output=True, text=True)
    assert out.returncode == 2 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_benchmarks_precompile_the_family_builds_their_linears_take(monkeypatch):
    """precompile_made (convnet-bench gemv, gemm and autotune): the union of what each Linear records in a dry run,
    every gemm.cu build a family build (KERNEL_SUBSET), never the whole file no launch uses."""
    from convnet.gpu import recorder
    from convnet.gpu.gemm import Linear
    got = []
    monkeypatch.setattr(recorder, "precompile", lambda builds, arch, workers=None: got.append(builds) or [])
    makers = [lambda r: Linear(r, "vec4", {}, "t"), lambda r: Linear(r, "bf16_wgmma", {"BF_BN": 128}, "t")]
    recorder.precompile_made(makers, "sm_90a")
    assert got[0] == recorder.kernels_of(makers[0], "sm_90a") | recorder.kernels_of(makers[1], "sm_90a")
    assert got[0] and all(f == "gemm.cu" and dict(d).get("KERNEL_SUBSET") == 1 for f, d in got[0])
