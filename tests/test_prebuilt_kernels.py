"""Kernels built ahead of time (convnet.gpu.ahead, build.prebuilt_cubin): what a model needs is compiled at once
before it is constructed, and builds made by `make kernels` are loaded without nvcc. No GPU, no nvcc needed.

These tests patch convnet.gpu.build (nvcc, the kernel folder, subprocess.run, compile_cubin) while the compile
test's builds may be compiling on other threads of the same session (tests/conftest.py): each waits for them first,
and the file sorts after test_kernels_compile.py so that by then they are done."""
import json
import os
import threading

import numpy as np
import pytest

from convnet import catalogue
from convnet.errors import GPUError
from convnet.gpu import ahead, build
from convnet.gpu.recorder import RecordingRuntime, kernels_of


@pytest.fixture(autouse=True)
def background_builds_done(early_builds):
    """The compile test's background builds finished (a background build saw a patched nvcc_path as "no nvcc")."""
    if early_builds is not None:
        early_builds.finish(os.cpu_count() or 1)


@pytest.fixture
def prebuilt(tmp_path, monkeypatch):
    """An empty PREBUILT_DIR of our own, its manifest saying CUDA 13.0 made it, and an empty kernel cache (what
    other tests compiled must not answer for a build that is not prebuilt)."""
    monkeypatch.setattr(build, "PREBUILT_DIR", tmp_path)
    monkeypatch.setenv("CONVNET_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "_driver_cuda", None)
    (tmp_path / build.MANIFEST).write_text(json.dumps({"cuda": [13, 0], "nvcc": "test", "archs": {}}))
    build.prebuilt_manifest.cache_clear()
    yield tmp_path
    build.prebuilt_manifest.cache_clear()


def put(folder, kernel_file, defines, arch, data: bytes):
    (folder / arch).mkdir(parents=True, exist_ok=True)
    name = build.prebuilt_name(kernel_file, defines, arch)
    (folder / arch / f"{name}.cubin").write_bytes(data)
    (folder / arch / f"{name}.log").write_text(f"ptxas report of {kernel_file}")


@pytest.mark.parametrize("name", ["fast_bf16", "fast_bf16_xb", "fast_bf16_mk", "fast_bf16_df", "fast", "fast_mma", "req_4",
                                  "req_6", "fast_fp32"])
def test_gpt2_builds_depend_on_the_head_size_only(name):
    """The stand-in model ahead.ensure and make kernels dry-run (one layer, 64 tokens of vocabulary) asks for the
    same builds as full models with other depths, vocabularies and contexts, and one set of builds serves every
    GPT-2 width of head size 64 (124M to xl: the LayerNorms' row width is picked at launch, not compiled in), but
    for the dataflow decode kernel's slot size at large's and xl's widths (dataflow.slot_bytes: its greedy build
    and its sampler's; fast_bf16 takes the kernel at xl's width), which make kernels builds too (it dry-runs every
    width)."""
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.model import GPT2Config, random_params
    v = catalogue.get(name, "gpt2")
    seen = []
    for config in (GPT2Config(3, 2, 128, 1000, 96), GPT2Config(2, 2, 128, 257, 160)):
        with np.errstate(all="ignore"):
            seen.append(kernels_of(lambda r: GPUGenerator(GPT2GPU(random_params(config), config, v, r))))
            params, dry = ahead.gpt2_dry_model(config)
            seen.append(kernels_of(lambda r: GPUGenerator(GPT2GPU(params, dry, v, r))))
    assert seen[0] and all(s == seen[0] for s in seen)
    widths = []
    for heads, width in ((12, 768), (16, 1024), (20, 1280), (25, 1600)):
        params, dry = ahead.gpt2_dry_model(GPT2Config(12, heads, width, 50257, 1024))
        with np.errstate(all="ignore"):
            widths.append(kernels_of(lambda r: GPUGenerator(GPT2GPU(params, dry, v, r))))
    assert widths[0] and widths[1] == widths[0]
    from convnet.gpt2 import dataflow
    # fast_bf16 (decode "auto") takes the dataflow kernel from dataflow.PREFERRED_FROM wide: xl's, not large's
    own_slots = {"fast_bf16_df": ((20, 1280), (25, 1600)), "fast_bf16": ((25, 1600),)}.get(name, ())
    for (heads, width), w in zip(((20, 1280), (25, 1600)), widths[2:]):
        if (heads, width) not in own_slots:
            assert w == widths[0]
            continue
        own = w - widths[0]                              # the greedy build and the sampler's (DF_SAMPLER=1)
        assert {f for f, _ in own} == {dataflow.KERNEL_FILE} and len(own) == 2
        assert {dict(d)["DF_SLOT_BYTES"] for _, d in own} == {dataflow.slot_bytes(width)} != {dataflow.SLOT_BYTES}
        assert sorted(dict(d).get("DF_SAMPLER", 0) for _, d in own) == [0, 1]
        assert len(widths[0] - w) == (2 if name == "fast_bf16_df" else 0)
        assert own <= ahead.gpt2_builds("sm_90a", [(width, heads)])


def test_prebuilt_cubin_loads_without_nvcc(prebuilt, monkeypatch):
    monkeypatch.setattr(build, "nvcc_path", lambda: None)
    d = {"LN_CONST": 0}
    put(prebuilt, "transformer.cu", d, "sm_90a", b"cubin-90a")
    put(prebuilt, "transformer.cu", d, "sm_80", b"cubin-80")
    assert build.compile_cubin("transformer.cu", d, "sm_90a") == (b"cubin-90a", "ptxas report of transformer.cu")
    assert build.cached("transformer.cu", d, "sm_90a")
    assert build.compile_cubin("transformer.cu", d, "sm_86")[0] == b"cubin-80"     # sm_8x runs sm_80's cubins
    assert build.prebuilt_cubin("transformer.cu", d, "sm_89")[0] == b"cubin-80"
    assert build.prebuilt_cubin("transformer.cu", {**d, "LN_CONST": 1}, "sm_90a") is None      # another build
    assert build.prebuilt_cubin("transformer.cu", d, "sm_75") is None
    with pytest.raises(GPUError, match="nvcc not found"):          # not prebuilt, no compiler: one clear error
        build.compile_cubin("transformer.cu", {**d, "LN_CONST": 1}, "sm_90a")


def test_prebuilt_is_passed_over_where_the_driver_is_older_than_its_cuda(prebuilt, monkeypatch):
    d = {"LN_CONST": 0}
    put(prebuilt, "transformer.cu", d, "sm_90a", b"cubin")
    build.set_driver_cuda(13000)
    assert build.prebuilt_cubin("transformer.cu", d, "sm_90a") is not None
    build.set_driver_cuda(12080)
    assert build.prebuilt_cubin("transformer.cu", d, "sm_90a") is None
    monkeypatch.setattr(build, "nvcc_path", lambda: None)
    assert not build.cached("transformer.cu", d, "sm_90a")


def test_prebuilt_key_follows_the_source(prebuilt, tmp_path, monkeypatch):
    """A kernel edited since make kernels is not taken from the prebuilt folder (its key names the source)."""
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for f in build.KERNELS_DIR.rglob("*.cuh"):
        (kernels / f.relative_to(build.KERNELS_DIR)).parent.mkdir(exist_ok=True)
        (kernels / f.relative_to(build.KERNELS_DIR)).write_bytes(f.read_bytes())
    (kernels / "ops.cu").write_text("// one version\n")
    monkeypatch.setattr(build, "KERNELS_DIR", kernels)
    put(prebuilt, "ops.cu", {}, "sm_90a", b"old")
    assert build.prebuilt_cubin("ops.cu", {}, "sm_90a") == (b"old", "ptxas report of ops.cu")
    (kernels / "ops.cu").write_text("// another version, longer\n")
    assert build.prebuilt_cubin("ops.cu", {}, "sm_90a") is None


def fake_compiler(monkeypatch):
    """compile_cubin recording what it is asked for (from several threads); nothing cached, nvcc 'present'."""
    calls, lock = [], threading.Lock()

    def compile_cubin(f, d, arch, prebuilt=True, **_):
        with lock:
            calls.append((f, tuple(sorted(d.items())), arch, prebuilt))
        return b"cubin", "report"
    monkeypatch.setattr(build, "compile_cubin", compile_cubin)
    monkeypatch.setattr(build, "cached", lambda *a: False)
    monkeypatch.setattr(build, "nvcc_path", lambda: "/usr/bin/nvcc")
    monkeypatch.setattr(build, "cubin_dir", lambda: "/tmp/cache/cubin")
    return calls


def test_ensure_compiles_a_models_missing_builds_at_once(lenet_weights, monkeypatch, capsys):
    from convnet.gpu.lenet import GPULeNet
    v = catalogue.get("tc_lane_hv")
    want = kernels_of(lambda r: GPULeNet(v, lenet_weights, r))
    calls = fake_compiler(monkeypatch)
    ahead.ensure(lambda r: GPULeNet(v, lenet_weights, r), "sm_90a", "LeNet tc_lane_hv")
    assert {(f, d) for f, d, _, _ in calls} == want and len(calls) == len(want)
    assert all(a == "sm_90a" and not p for _, _, a, p in calls)
    err = capsys.readouterr().err
    assert f"compiling {len(want)} kernel builds for LeNet tc_lane_hv (sm_90a)" in err and "about" in err
    monkeypatch.setattr(build, "cached", lambda *a: True)            # all there: nothing compiled, nothing said
    calls.clear()
    ahead.ensure(lambda r: GPULeNet(v, lenet_weights, r), "sm_90a", "LeNet tc_lane_hv")
    assert calls == [] and capsys.readouterr().err == ""


def test_ensure_without_nvcc_names_what_is_missing(lenet_weights, monkeypatch):
    from convnet.gpu.lenet import GPULeNet
    fake_compiler(monkeypatch)
    monkeypatch.setattr(build, "nvcc_path", lambda: None)
    with pytest.raises(GPUError, match=r"kernel builds for LeNet fused are not built ahead of time for sm_80 and "
                                       r"nvcc is not found"):
        ahead.ensure(lambda r: GPULeNet(catalogue.get("fused"), lenet_weights, r), "sm_80", "LeNet fused")


def test_ensure_leaves_set_up_errors_to_the_real_construction(monkeypatch):
    calls = fake_compiler(monkeypatch)

    def refuse(rt):
        raise GPUError("this model cannot run")
    ahead.ensure(refuse, "sm_90a", "x")
    assert calls == []


def test_make_kernels_writes_the_builds_under_compiler_free_keys(prebuilt, monkeypatch):
    builds = {("transformer.cu", (("LN_CONST", 0),)), ("ops.cu", ())}
    monkeypatch.setattr(ahead, "lenet_builds", lambda arch: set())
    monkeypatch.setattr(ahead, "onnx_builds", lambda arch: set())
    monkeypatch.setattr(ahead, "gpt2_builds", lambda arch: builds)
    calls = fake_compiler(monkeypatch)
    monkeypatch.setattr(build, "nvcc_version", lambda: "Cuda compilation tools, release 13.0, V13.0.88\nBuild x\n")
    stale = prebuilt / "sm_90a" / "gemm-0123.cubin"
    stale.parent.mkdir()
    stale.write_bytes(b"from an older catalogue")
    summary = ahead.build_ahead(("sm_90a",), workers=2)
    files = sorted(p.name for p in (prebuilt / "sm_90a").iterdir())
    assert files == sorted(f"{build.prebuilt_name(f, dict(d), 'sm_90a')}.{s}" for f, d in builds for s in ("cubin", "log"))
    manifest = json.loads((prebuilt / build.MANIFEST).read_text())
    assert manifest["cuda"] == [13, 0] and manifest["archs"]["sm_90a"]["builds"] == 2
    assert summary["archs"]["sm_90a"]["compile_s"] >= 0
    assert len([c for c in calls if not c[3]]) == 4           # compiled (all missing), then read back to copy
    assert build.prebuilt_cubin("ops.cu", {}, "sm_90a") == (b"cubin", "report")
    summary = ahead.build_ahead(("compute_80",), workers=2)           # the PTX target: .ptx files, sm_90a kept
    assert sorted(p.suffix for p in (prebuilt / "compute_80").iterdir()) == [".log", ".log", ".ptx", ".ptx"]
    assert set(json.loads((prebuilt / build.MANIFEST).read_text())["archs"]) == {"sm_90a", "compute_80"}


def test_the_recorder_is_the_engines(monkeypatch):
    """The engine compiles ahead through convnet.gpu.recorder; the instruments' dry run is the same class."""
    from convnet.bench import dryrun
    assert dryrun.RecordingRuntime is RecordingRuntime


def test_gpus_past_hopper_take_the_ptx(prebuilt, monkeypatch):
    """sm_100 / sm_120: no cubin of theirs ships; the compute_80 PTX does, handed over NUL-terminated (what
    cuModuleLoadData wants of PTX)."""
    monkeypatch.setattr(build, "nvcc_path", lambda: None)
    d = {"LN_CONST": 0}
    (prebuilt / "compute_80").mkdir()
    name = build.prebuilt_name("transformer.cu", d, "compute_80")
    (prebuilt / "compute_80" / f"{name}.ptx").write_bytes(b".version 9.0\n")
    (prebuilt / "compute_80" / f"{name}.log").write_text("")
    for arch in ("sm_100", "sm_103", "sm_120"):
        assert build.prebuilt_cubin("transformer.cu", d, arch) == (b".version 9.0\n\0", "")
    assert build.prebuilt_cubin("transformer.cu", d, "sm_90a") is None      # Hopper: its own cubins only
    assert build.prebuilt_archs("sm_86") == ["sm_86", "sm_80"] and build.sm_of("compute_80") == 80


@pytest.mark.skipif(build.nvcc_path() is None, reason="nvcc not installed")
def test_a_virtual_target_compiles_to_ptx(tmp_path):
    data, _ = build.compile_cubin("transformer.cu", {"LN_CONST": 0}, "compute_80", out_dir=tmp_path)
    text = data.decode()
    assert ".version" in text and ".target sm_80" in text and ".entry layernorm_warp" in text
    assert [p.suffix for p in tmp_path.iterdir() if p.suffix != ".log"] == [".ptx"]


@pytest.mark.skipif(build.nvcc_path() is None, reason="nvcc not installed")
def test_the_bf16_gemm_builds_of_ampere_compile_beside_hopper_only_headers(tmp_path):
    """make kernels builds gemm.cu's bf16 mma.sync path for compute_80; the file also holds sm_90a-only code (v8's
    wgmma through kernels/wgmma.cuh), which must compile away there, not fail (it did: an alias of an undeclared
    template)."""
    builds = sorted(b for b in ahead.gpt2_builds("compute_80") if b[0] == "gemm.cu" and dict(b[1]).get("KERNELS_BF16_MMA"))
    assert builds
    data, _ = build.compile_cubin("gemm.cu", dict(builds[0][1]), "compute_80", out_dir=tmp_path)
    assert ".entry gemm_bf16_mma" in data.decode()


def test_the_onnx_path_builds_are_made_ahead():
    """make kernels carries the ONNX path's builds: its kernels take shapes as arguments, one build per file; the
    Hopper convolutions (cnn_wgmma.cu) only for sm_90a, where the host side launches them."""
    hopper = ahead.onnx_builds("sm_90a")
    assert {"cnn.cu", "cnn_igemm.cu", "cnn_wgmma.cu", "gemm.cu"} <= {f for f, _ in hopper}
    for arch in ("sm_80", "compute_80"):
        assert ahead.onnx_builds(arch) == {b for b in hopper if b[0] != "cnn_wgmma.cu"}


def test_a_failed_nvcc_start_is_tried_again_then_said_in_one_line(monkeypatch):
    """Starting nvcc can fail for a moment under memory pressure (fork: EFAULT): build._run_nvcc tries again, and
    after SPAWN_TRIES failures raises one GPUError line instead of an OSError that kills a build thread."""
    import subprocess
    import time
    calls = []

    def flaky(cmd, **kw):
        calls.append(cmd)
        if len(calls) < build.SPAWN_TRIES:
            raise OSError(14, "Bad address")
        return subprocess.CompletedProcess(cmd, 0, "", "ptxas info")

    def broken(cmd, **kw):
        raise OSError(14, "Bad address")
    monkeypatch.setattr(time, "sleep", lambda s: None)
    monkeypatch.setattr(build.subprocess, "run", flaky)
    assert build._run_nvcc(["nvcc"], "x.cu").stderr == "ptxas info" and len(calls) == build.SPAWN_TRIES
    monkeypatch.setattr(build.subprocess, "run", broken)
    with pytest.raises(GPUError, match=r"^could not start nvcc for x.cu: Bad address$"):
        build._run_nvcc(["nvcc"], "x.cu")
