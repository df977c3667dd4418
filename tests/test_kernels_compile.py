"""Every kernel, under every GPU variant's -D constants for both LeNet layers and GPT-2, compiles with nvcc for
sm_90a (the Hopper target the runtime uses) without register spills, and every kernel a variant takes from a build
is in it. Runs without a GPU (skips where nvcc is absent). The distinct builds of all variants are compiled once,
in parallel on every core, before the per-variant checks read their reports."""
import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from convnet import catalogue, weights as wio
from convnet.errors import GPUError
from convnet.gpu import build

pytestmark = pytest.mark.skipif(build.nvcc_path() is None, reason="nvcc not installed")

# the current catalogue (make test) and the archive (make test-archive, marker `archive`): every variant a user can
# name still builds
GPU_VARIANTS = [v for m in catalogue.MODELS for v in catalogue.load_all(m, archive=True).values()
                if v.needs_gpu]
CURRENT = [v for v in GPU_VARIANTS if not v.archived]
ARCHIVED = [v for v in GPU_VARIANTS if v.archived]


_ENTRIES = {}


def entries_of(variant) -> dict:
    """{(kernel file, defines): kernel names the variant takes from that build}, dry-run once a variant (the compile
    step and each variant's check both ask)."""
    key = (variant.model, variant.name, variant.archived)
    if key not in _ENTRIES:
        _ENTRIES[key] = dry_run_entries(variant)
    return _ENTRIES[key]


def dry_run_entries(variant) -> dict:
    from convnet.bench import dryrun
    if variant.model == "gpt2":
        # make kernels' stand-ins (one layer, small vocabulary) at 124M's, large's and xl's widths (the dataflow
        # kernel's slots differ at large's and xl's)
        from convnet.gpt2.gpu import GPT2GPU
        from convnet.gpt2.model import GPT2Config
        from convnet.gpu import ahead
        out = {}
        for size in ("124M", "large", "xl"):
            C, H = ahead.GPT2_WIDTHS[size]
            params, config = ahead.gpt2_dry_model(GPT2Config(1, H, C, 64, 64))
            for b, names in dryrun.entries_of(lambda rt: GPT2GPU(params, config, variant, rt)).items():
                out.setdefault(b, set()).update(names)
        return out
    if variant.model == "onnx":             # the path takes every kernel of its file whatever the network
        from convnet.cnn.gpu import GPUNet
        from convnet.cnn.graph import Graph, Layer
        net = Graph([Layer("flatten", ["x"], "y", "flatten")], "x", (1, 4, 4), "y", {})
        return dryrun.entries_of(lambda rt: GPUNet(net, variant, rt))
    from convnet.gpu import lenet
    return dryrun.entries_of(lambda rt: lenet.GPULeNet(variant, wio.load(), rt))


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


def distinct_builds(variants) -> set:
    return {b for v in variants for b in entries_of(v)}


def compile_all(variants) -> dict:
    """{build: ptxas report, or the GPUError nvcc gave} for the distinct builds of `variants`, compiled once each,
    one nvcc per core."""
    from helpers import Builds
    return Builds(distinct_builds(variants)).finish(os.cpu_count() or 1)


@pytest.fixture(scope="module")
def reports(early_builds):
    if early_builds is not None:          # started when the session started (conftest): finish on every core
        return early_builds.finish(os.cpu_count() or 1)
    return compile_all(CURRENT)


@pytest.fixture(scope="module")
def archive_reports():
    return compile_all(ARCHIVED)


@pytest.mark.parametrize("variant", CURRENT, ids=[f"{v.model}-{v.name}" for v in CURRENT])
def test_variant_kernels_compile_without_spills(variant, reports):
    check_variant(variant, reports)


@pytest.mark.archive
@pytest.mark.parametrize("variant", ARCHIVED, ids=[f"{v.model}-{v.name}" for v in ARCHIVED])
def test_archived_variant_kernels_compile_without_spills(variant, archive_reports):
    check_variant(variant, archive_reports)


def check_variant(variant, reports) -> None:
    entries = entries_of(variant)
    assert entries, "the variant builds no kernel"
    for (kernel_file, defines), names in sorted(entries.items()):
        log = reports[(kernel_file, defines)]
        if isinstance(log, GPUError):
            raise log
        found = spills(log)
        assert found, f"no ptxas report for {kernel_file}"
        missing = names - set(found)
        assert not missing, f"{kernel_file} {dict(defines)} lacks the kernels {sorted(missing)} the variant launches"
        spilled = {k: v for k, v in found.items() if v}
        assert not spilled, f"{kernel_file} {dict(defines)} spills registers: {spilled}"


def test_a_family_build_holds_its_family_alone():
    """gemm.cu marks its kernel families: the build of one kernel compiles that family only, and a build asked for
    no kernel compiles them all. Kernels a macro declares per invocation (v13's gemm_slab_m<MF>_k<KS>_bf16) belong to
    the family around the invocation: they once compiled the whole file, 13 families, for each slab build."""
    d = build.kernel_defines("gemm.cu", {"TILE": 16}, "gemm_tiled")
    assert d == {"TILE": 16, "KERNEL_SUBSET": 1, "KERNELS_TILED": 1}
    assert set(spills(build.compile_cubin("gemm.cu", d, "sm_90a")[1])) == {"gemm_tiled"}
    assert build.kernel_defines("gemm.cu", {"TILE": 16}) == {"TILE": 16}
    families = build._families(build.KERNELS_DIR / "gemm.cu", 0)
    assert len(families) == 66 and families["gemm_skinny_bf16_lnf1_pick"] == "KERNELS_SKINNY_BF16"
    assert {families[f"gemm_slab_m{mf}_k{ks}_bf16"] for mf in (1, 2, 3, 4) for ks in (1, 2, 4, 8)} == \
        {"KERNELS_SLAB_BF16"}
    assert {families[f"gemm_gemv_mma_k{ks}_bf16"] for ks in (1, 2, 4, 8)} == {"KERNELS_GEMV_MMA_BF16"}
    assert build.kernel_defines("ops.cu", {}, "relu_maxpool") == {}       # a file without families: as given


def test_gemm_compiles_whole_under_fast_bf16():
    """A build asked for no kernel (rt.module("gemm.cu", defines), as the GEMM benchmarks' precompile made until
    ab87bcf) compiles every bf16 family of gemm.cu at once, so names that two families each define must not collide
    (v8's bf_cluster_rank, 0 unless BF_CLUSTER, beside the K-split clusters' helper of v13 and v14 once had the same
    name); the family builds alone never show it."""
    defines = {**catalogue.get("fast_bf16", "gpt2").defines, "BF_OUT": 0}
    assert "KERNEL_SUBSET" not in build.kernel_defines("gemm.cu", defines)
    # PTX for the virtual target: the front end, where a redefinition stops, at half a cubin's time
    ptx = build.compile_cubin("gemm.cu", build.kernel_defines("gemm.cu", defines), "compute_90a")[0].decode()
    assert all(f".entry {k}(" in ptx
               for k in ("gemm_bf16_wgmma", "gemm_skinny_bf16_1", "gemm_slab_m1_k2_bf16", "gemm_gemv_mma_k4_bf16"))


def test_a_build_keeps_only_the_constants_its_text_names():
    """A variant's -D constants reach every file it builds; those the compiled text never names (comments aside) are
    left out, so variants that differ only in another kernel's constants share a build: here a GEMV tunable, a v13
    switch and a name found only in a comment, against transformer.cu's LayerNorm and attention.cu's decode family."""
    d = {"BFS_CG": 8, "BFM_SLAB": 1, "EMB_VEC": 8, "PDL": 1, "HEAD_DIM": 64, "Tunables": 1}
    assert build.kernel_defines("transformer.cu", d, "layernorm_warp_bf16") == {"EMB_VEC": 8, "PDL": 1}
    assert build.kernel_defines("attention.cu", d, "decode_attention_bf16") == \
        {"HEAD_DIM": 64, "PDL": 1, "KERNEL_SUBSET": 1, "KERNELS_DECODE_BF16": 1}
    assert build.kernel_defines("gemm.cu", d, "gemm_skinny_bf16")["BFS_CG"] == 8
    # gemm.cu's bf16 pieces sit in their families' guards (v12's in v13's too: v13 takes its k step), so a v13 build
    # no longer names v10's tunables, and v12's build no longer names v13's
    slab = build.kernel_defines("gemm.cu", {**d, "BFM_SLAB_WARPS": 4, "BF_GROUP": 32}, "gemm_slab_m2_k4_bf16")
    assert "BFS_CG" not in slab and "BF_GROUP" not in slab and slab["BFM_SLAB_WARPS"] == 4   # BF_GROUP: v8's, v9's
    assert build.kernel_defines("gemm.cu", {"BF_GROUP": 32, "BF_OUT": 1}, "gemm_bf16_mma")["BF_GROUP"] == 32
    assert "BFM_SLAB_WARPS" not in build.kernel_defines("gemm.cu", {**d, "BFM_SLAB_WARPS": 4}, "gemm_small_m2_bf16")
    assert "Tunables" not in build.kernel_defines("gemm.cu", d)              # gemm.cu names it in a comment only
    # the same build with or without a constant it never names
    assert build.cache_name("transformer.cu", build.kernel_defines("transformer.cu", d, "layernorm_warp_bf16"),
                            "sm_90a", compiler=False) == \
        build.cache_name("transformer.cu", build.kernel_defines("transformer.cu", {"EMB_VEC": 8, "PDL": 1},
                                                                "layernorm_warp_bf16"), "sm_90a", compiler=False)


def test_compile_error_is_reported(tmp_path, monkeypatch):
    from convnet.gpu import build as b
    monkeypatch.setattr(b, "KERNELS_DIR", tmp_path)
    (tmp_path / "broken.cu").write_text("__global__ void k() { this is not C++; }\n")
    with pytest.raises(GPUError, match="nvcc failed on broken.cu"):
        b.compile_cubin("broken.cu", {}, "sm_90")


@pytest.mark.parametrize("name,n_head,n_embd", [("fast_fp32", 1, 256), ("fast_mma", 2, 320)])
def test_wide_head_attention_compiles(name, n_head, n_embd):
    """The fp32 / TF32 flash variants take heads past 128 (up to 256): their attention.cu builds compile for Hopper
    and for sm_80 (the bf16 mma.sync kernel's static_assert once stopped the whole file there, and
    decode_attention's merge buffer passed 48 KB of static shared memory at 256)."""
    from convnet.bench import dryrun
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.model import GPT2Config, random_params
    config = GPT2Config(n_layer=1, n_head=n_head, n_embd=n_embd, vocab_size=64, n_ctx=64)
    builds = dryrun.kernels_of(lambda rt: GPT2GPU(random_params(config), config, catalogue.get(name, "gpt2"), rt))
    attention = [dict(d) for f, d in sorted(builds) if f == "attention.cu"]
    assert attention and all(d["HEAD_DIM"] == n_embd // n_head for d in attention)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(lambda job: build.compile_cubin("attention.cu", *job),
                      [(d, arch) for d in attention for arch in ("sm_90a", "sm_80")]))
