"""Which variant `auto` picks on which GPU, and the one-line refusal of a variant the GPU cannot run
(CPU tests: the GPU's presence and compute capability are stood in for)."""
import pytest

from convnet import catalogue, runner
from convnet.errors import GPUUnavailable


@pytest.fixture
def gpu(monkeypatch):
    """gpu(sm): pretend device 0 is a GPU of compute capability sm (x 10); gpu(0): no GPU."""
    def pretend(sm):
        monkeypatch.setattr(runner, "gpu_available", lambda: (sm > 0, f"GPU sm{sm}" if sm else "no CUDA device"))
        monkeypatch.setattr(runner, "compute_capability", lambda: sm)
    return pretend


@pytest.mark.parametrize("model, sm, want", [
    ("gpt2", 90, "fast"), ("gpt2", 89, "fast_mma"), ("gpt2", 80, "fast_mma"), ("gpt2", 75, "vec4"),
    ("lenet86", 90, "tc_lane_hv"), ("lenet86", 80, "tc_lane_hv"), ("lenet86", 75, "fused_head"),
])
def test_auto_takes_the_fastest_variant_this_gpu_runs(gpu, model, sm, want):
    gpu(sm)
    assert catalogue.best_gpu_variant(model, sm).name == want
    assert runner.resolve_variant("auto", model).name == want


def test_auto_without_gpu_is_cpu_and_says_so(gpu, capsys):
    gpu(0)
    assert runner.resolve_variant("auto", "gpt2").name == "cpu"
    assert "variant cpu" in capsys.readouterr().err


def test_a_variant_above_the_gpu_is_refused_naming_one_that_runs(gpu):
    gpu(80)
    with pytest.raises(GPUUnavailable, match=r"'fast' needs compute capability 9\.0.*'fast_mma' runs here"):
        runner.resolve_variant("fast", "gpt2")
    assert runner.runs_here(catalogue.get("fast", "gpt2"))[0] is False
    assert runner.runs_here(catalogue.get("fast_mma", "gpt2")) == (True, "")


@pytest.mark.parametrize("model", catalogue.MODELS)
def test_min_sm_matches_what_the_kernels_use(model):
    """wgmma needs sm_90; mma.sync TF32/f16, cp.async (every flash kernel) and the tensor-core convolution
    need sm_80: the catalogue's min_sm says so for every variant that uses them."""
    for v in catalogue.load_all(model, archive=True).values():
        p = v.params
        need = 90 if p.get("gemm") == "wgmma" else 80 if (
            p.get("gemm") == "tf32" or p.get("attention") == "flash" or v.strategy == "mma") else 0
        assert v.min_sm >= need, (v.name, v.min_sm, need)
        if v.fallback:
            assert catalogue.get(v.fallback, model).min_sm < v.min_sm, v.name
