"""Every kernel, under every GPU variant's -D constants for both LeNet layers, compiles with nvcc for
sm_90a (the Hopper target the runtime uses) without register spills. Runs without a GPU (skips where nvcc is absent)."""
import re

import pytest

from convnet import catalogue, weights as wio
from convnet.gpu import build

pytestmark = pytest.mark.skipif(build.nvcc_path() is None, reason="nvcc not installed")

GPU_VARIANTS = [v for m in catalogue.MODELS for v in catalogue.load_all(m).values() if v.needs_gpu]


def kernels_of(variant):
    from convnet.bench import dryrun
    if variant.model == "gpt2":
        # GPT-2 124M's kernel constants (head size 64, n_embd 768) with a one-layer, small-vocabulary model.
        from convnet.gpt2.gpu import GPT2GPU
        from convnet.gpt2.model import GPT2Config, random_params
        config = GPT2Config(n_layer=1, n_head=12, n_embd=768, vocab_size=64, n_ctx=64)
        return dryrun.kernels_of(lambda rt: GPT2GPU(random_params(config), config, variant, rt))
    from convnet.gpu import lenet
    return dryrun.kernels_of(lambda rt: lenet.GPULeNet(variant, wio.load(), rt))


def spills(ptxas_log: str) -> dict:
    """kernel name -> spill store + load bytes, from nvcc -Xptxas -v output."""
    out, current = {}, None
    for line in ptxas_log.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            current = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current:
            out[current] = int(m.group(1)) + int(m.group(2))
    return out


@pytest.mark.parametrize("variant", GPU_VARIANTS, ids=[f"{v.model}-{v.name}" for v in GPU_VARIANTS])
def test_variant_kernels_compile_without_spills(variant):
    builds = kernels_of(variant)
    assert builds, "the variant builds no kernel"
    for kernel_file, defines in sorted(builds):
        _, log = build.compile_cubin(kernel_file, dict(defines), "sm_90a")
        found = spills(log)
        assert found, f"no ptxas report for {kernel_file}"
        spilled = {k: v for k, v in found.items() if v}
        assert not spilled, f"{kernel_file} {dict(defines)} spills registers: {spilled}"


def test_compile_error_is_reported(tmp_path, monkeypatch):
    from convnet.errors import GPUError
    from convnet.gpu import build as b
    monkeypatch.setattr(b, "KERNELS_DIR", tmp_path)
    (tmp_path / "broken.cu").write_text("__global__ void k() { this is not C++; }\n")
    with pytest.raises(GPUError, match="nvcc failed on broken.cu"):
        b.compile_cubin("broken.cu", {}, "sm_90")


@pytest.mark.parametrize("name,n_head,n_embd", [("fast_fp32", 1, 256), ("fast_mma", 2, 320)])
def test_wide_head_attention_compiles(name, n_head, n_embd):
    """The fp32 / TF32 flash variants take heads past 128 (up to 256): their attention.cu builds compile for Hopper
    and for sm_80 (session 26: the bf16 mma.sync kernel's static_assert stopped the whole file there, and
    decode_attention's merge buffer passed 48 KB of static shared memory at 256)."""
    from convnet.bench import dryrun
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.model import GPT2Config, random_params
    config = GPT2Config(n_layer=1, n_head=n_head, n_embd=n_embd, vocab_size=64, n_ctx=64)
    builds = dryrun.kernels_of(lambda rt: GPT2GPU(random_params(config), config, catalogue.get(name, "gpt2"), rt))
    attention = [dict(d) for f, d in sorted(builds) if f == "attention.cu"]
    assert attention and all(d["HEAD_DIM"] == n_embd // n_head for d in attention)
    for defines in attention:
        for arch in ("sm_90a", "sm_80"):
            build.compile_cubin("attention.cu", defines, arch)
