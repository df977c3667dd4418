"""The command line end to end, as a user runs it."""
import json
import subprocess
import sys

import pytest

from convnet.paths import CHECKOUT_ROOT as ROOT


def run(*args, env_cache=None):
    return subprocess.run([sys.executable, str(ROOT / "run_milestone.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_cpu_variant_small_batch(tmp_path):
    out = tmp_path / "r.json"
    p = run("--variant", "cpu", "--batch", "200", "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert "Test batch size: 200" in p.stdout
    assert "Conv-forward layer 1:" in p.stdout and "Conv-forward layer 2:" in p.stdout
    assert "Test Accuracy:" in p.stdout
    result = json.loads(out.read_text())
    assert result["batch"] == 200 and result["variant"] == "cpu"
    assert 0.85 <= result["accuracy"] <= 1.0
    assert all(op > 0 and layer >= op for op, layer in zip(result["op_ms"], result["layer_ms"]))


def test_list_shows_every_variant():
    from convnet import catalogue
    p = run("--list")
    assert p.returncode == 0, p.stderr
    for name in catalogue.load_all():
        assert f"| {name} " in p.stdout


@pytest.mark.parametrize("args,message", [
    (["--batch", "0"], "argument --batch: must be at least 1"),
    (["--batch", "-5"], "argument --batch: must be at least 1"),
    (["--batch", "ten"], "whole number"),
    (["--batch", "20000", "--variant", "cpu"], "larger than the 10000 test images"),
    (["--variant", "nope"], "unknown lenet86 variant 'nope'; known variants: cpu"),
    (["--variant", "cpu", "--bogus"], "unrecognized arguments"),
    (["--variant", "cpu", "--stream", "1000"], "--stream needs a GPU variant"),
    (["--stream", "0"], "argument --stream: must be at least 1"),
    (["--variant", "cpu", "--roofline"], "--roofline is a measurement: run convnet-bench roofline"),
    (["--model", "gpt2", "--variant", "nope"], "--model gpt2 lists GPT-2's variants (--list)"),
    (["--model", "resnet"], "--model resnet: one of lenet86, gpt2, onnx, or an .onnx file"),
    (["--variant", "cpu", "--plot", "x.png"], "--plot is a measurement"),
    (["--compare", "cpu"], "--compare is a measurement: run convnet-bench compare"),
    (["--variant", "cpu", "--predictions"], "--predictions needs --json"),
    (["--variant", "cpu", "--chunk", "100"], "--chunk needs --stream"),
    (["--variant", "cpu", "--checkpoint", "gpt2"], "--checkpoint is GPT-2's: convnet-gpt2 generate --checkpoint"),
    (["--variant", "cpu", "--seq", "64"], "--seq is GPT-2's: convnet-bench gpt2 --seq N"),
    (["--model", "gpt2", "--list", "--seq", "64"], "--seq is GPT-2's: convnet-bench gpt2 --seq N"),
    (["--model", "gpt2", "--stream", "100"], "its forward benchmark is convnet-bench gpt2"),
    (["--model", "gpt2", "--variant", "cpu"], "its text generation convnet-gpt2 generate"),
    (["--variant", "cpu", "--json", "/nonexistent-folder/r.json"], "folder /nonexistent-folder does not exist"),
    (["--variant", "cpu", "--json", "/tmp"], "--json /tmp: is a directory"),
])
def test_bad_input_gives_one_line_and_exit_2(args, message):
    p = run(*args)
    assert p.returncode == 2
    assert message in p.stderr
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_json_carries_version_time_gpu_and_predictions(tmp_path):
    import convnet
    from convnet import data, network, weights
    out = tmp_path / "r.json"
    p = run("--variant", "cpu", "--batch", "30", "--json", str(out), "--predictions")
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["version"] == convnet.__version__ and r["timestamp_utc"].endswith("+00:00")
    assert "gpu" in r and r["variant"] == "cpu"
    x, _ = data.load("test", limit=30)
    assert r["predictions"] == network.forward(x, weights.load()).argmax(1).tolist()
    assert not [f for f in tmp_path.iterdir() if f.name != "r.json"], "a temporary file was left behind"


def test_unusable_kernel_cache_warns_once_and_compiles_elsewhere(tmp_path, monkeypatch, capsys):
    """CONVNET_CACHE pointing at a file: the cubin cache falls back to a temporary folder, with one warning."""
    from convnet.gpu import build
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CONVNET_CACHE", str(blocker))
    first, second = build.cubin_dir(), build.cubin_dir()
    assert first == second and first.is_dir() and not str(first).startswith(str(blocker))
    assert capsys.readouterr().err.count("is not usable") == 1


def test_gpu_test_target_fails_where_no_gpu_test_can_run():
    """make gpu-test sets CONVNET_REQUIRE_GPU=1: without a GPU that is an error, not 'all skipped'."""
    from convnet.gpu import available
    if available()[0]:
        pytest.skip("a GPU is present: this checks the GPU-less machine")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/test_gpu_lenet.py"],
                       capture_output=True, text=True, cwd=ROOT, env={**__import__("os").environ,
                                                                      "CONVNET_REQUIRE_GPU": "1"})
    assert p.returncode != 0 and "no GPU test can run here" in p.stdout + p.stderr


def test_empty_data_dir(tmp_path):
    p = run("--variant", "cpu", "--batch", "10", "--data-dir", str(tmp_path))
    assert p.returncode == 2
    assert "t10k-images-idx3-ubyte.gz: file not found" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_gpu_variant_without_gpu_is_a_clear_error():
    from convnet import catalogue
    from convnet.gpu import available
    if available()[0]:
        pytest.skip("a GPU is present: this checks the GPU-less machine")
    gpu_variants = [v.name for v in catalogue.load_all().values() if v.needs_gpu]
    if not gpu_variants:
        pytest.skip("no GPU variant registered")
    p = run("--variant", gpu_variants[0], "--batch", "10")
    assert p.returncode == 2
    assert "needs a GPU" in p.stderr and "Traceback" not in p.stderr


def test_auto_falls_back_to_cpu_and_says_so():
    from convnet.gpu import available
    if available()[0]:
        pytest.skip("a GPU is present")
    p = run("--batch", "20")
    assert p.returncode == 0, p.stderr
    assert "running the numpy reference path" in p.stderr
    assert "Variant: cpu" in p.stdout


def bench(*args):
    return subprocess.run([sys.executable, "-m", "convnet.bench.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)


def test_compare_table_and_json(tmp_path):
    out = tmp_path / "c.json"
    p = bench("compare", "cpu", "--batch", "50", "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert "| variant" in p.stdout and "| cpu " in p.stdout and "Op Time 1 (ms)" in p.stdout
    saved = json.loads(out.read_text())
    assert saved["batch"] == 50 and saved["results"][0]["variant"] == "cpu"


def test_compare_unknown_variant_is_a_clear_error():
    p = bench("compare", "cpu", "nope", "--batch", "10")
    assert p.returncode == 2 and "unknown lenet86 variant 'nope'" in p.stderr and "Traceback" not in p.stderr


def test_gpt2_benchmark_without_gpu_is_a_clear_error():
    from convnet.gpu import available
    if available()[0]:
        pytest.skip("a GPU is present: this checks the GPU-less machine")
    p = bench("gpt2", "fast", "--batch", "1", "--seq", "8")
    assert p.returncode == 2
    assert "convnet-bench gpt2 measures the GPU and needs one" in p.stderr and "Traceback" not in p.stderr
    listing = run("--model", "gpt2", "--list")
    assert listing.returncode == 0 and "fast_fp32" in listing.stdout and "req_9" in listing.stdout


def test_gpt2_report_table_from_results():
    """The --model gpt2 table: ratios to baseline and to HF at the matching precision, error verdicts."""
    from convnet.bench.gpt2 import _format
    groups = {g: 1.0 for g in ("embed", "layernorm", "qkv", "attention", "attn_proj", "mlp_fc", "mlp_proj",
                                "elementwise", "lm_head")}
    base = {"variant": "baseline", "precision": "fp32", "tolerance": 1e-4, "rel_err": 2e-6, "device": "GPU X",
            "total_ms": 300.0, "groups_ms": groups, "tokens_per_s": 100.0}
    fast = {**base, "variant": "fast", "precision": "tf32", "tolerance": 1e-2, "rel_err": 0.5, "total_ms": 30.0,
            "decode_tok_s": 1234.0}
    text = _format([base, fast], {"fp32": 60.0, "tf32": 24.0, "versions": "torch t", "decode_tok_s": 100.0},
                   "what", 8, 1024, ["broken: FAILED: x"])
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "10.00x" in lines["fast"] and "0.80x" in lines["fast"] and "TOO LARGE" in lines["fast"]
    assert "0.20x" in lines["baseline"] and "(ok)" in lines["baseline"]
    assert "1234 tok/s; HF generate 100 tok/s" in text and text.endswith("broken: FAILED: x")


def test_stream_refuses_float_input_beyond_the_pinned_limit_but_not_uint8_variants():
    """Streaming 1,000,000 preprocessed float images would pin 27 GB: refused with a message naming a uint8
    variant; a variant that resizes on the GPU (alone or inside conv1) passes that check."""
    from convnet import catalogue
    from convnet.errors import UsageError
    from convnet.gpu.lenet import uploads_uint8
    from convnet.stream import stream
    with pytest.raises(UsageError, match="pinned host memory.*uint8"):
        stream(catalogue.get("fused"), 1_000_000)
    assert uploads_uint8(catalogue.get("fused_pool_u8")) and uploads_uint8(catalogue.get("tc_fused"))
    assert not uploads_uint8(catalogue.get("op_5_tc"))


def test_record_appends_the_runs_figures_to_a_results_table(tmp_path):
    import csv
    table = tmp_path / "t.csv"
    for _ in range(2):
        p = run("--variant", "cpu", "--batch", "20", "--record", str(table))
        assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 8 and {r["variant"] for r in rows} == {"cpu"}
    assert rows[0]["benchmark"] == "main job, batch 20: whole forward" and float(rows[0]["figure"]) > 0
    assert rows[3]["unit"] == "fraction" and rows[0]["commit"] and rows[0]["date"].startswith("20")
    (tmp_path / "notes.txt").write_text("mine\n")
    p = run("--variant", "cpu", "--batch", "20", "--record", str(tmp_path / "notes.txt"))
    assert p.returncode == 2 and "not a results table" in p.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_main_command_takes_a_variant_with_one_setting_changed(tmp_path):
    """convnet --variant NAME@KEY=V (as convnet-bench --variants): the catalogue variant with that param or -D constant
    changed, so one optimization can be switched off for a per-layer comparison; a malformed spec or an unknown
    name is one line and exit code 2, and a GPU variant on a machine without one says so in one line."""
    import numpy as np
    import onnx
    from convnet import catalogue
    from convnet.errors import UsageError
    sys.path.insert(0, str(ROOT / "tests"))
    from cnn_models import MODELS
    v = catalogue.variant_spec("igemm_f16_graph@dw_pairs=0,WGC_STAGES=2", "onnx")
    base = catalogue.get("igemm_f16_graph", "onnx")
    assert v.params == {**base.params, "dw_pairs": 0} and v.defines == {**base.defines, "WGC_STAGES": 2}
    assert v.name == "igemm_f16_graph_dw_pairs0_WGC_STAGES2" and catalogue.variant_spec("cpu", "onnx") is \
        catalogue.get("cpu", "onnx")
    for bad in ("igemm_f16_graph@dw_pairs", "igemm_f16_graph@=1", "nope@dw_pairs=0"):
        with pytest.raises(UsageError):
            catalogue.variant_spec(bad, "onnx")
    model, _ = MODELS["lenet5"](np.random.default_rng(0))
    onnx.save(model, str(tmp_path / "m.onnx"))
    for spec, line in (("igemm_f16_graph@dw_pairs", "expected NAME@KEY=VALUE"),
                       ("nope@dw_pairs=0", "unknown onnx variant 'nope'")):
        p = run("--model", str(tmp_path / "m.onnx"), "--variant", spec, "--batch", "2")
        assert p.returncode == 2 and line in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    from convnet.gpu import available
    if not available()[0]:
        p = run("--model", str(tmp_path / "m.onnx"), "--variant", "igemm_f16_graph@dw_pairs=0", "--batch", "2")
        assert p.returncode == 2 and "'igemm_f16_graph@dw_pairs=0' needs a GPU" in p.stderr
        assert "Traceback" not in p.stderr
