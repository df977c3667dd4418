"""convnet-bench gpt2 --record, without a GPU: run()'s results become results-table rows under one benchmark name
(each variant's forward, HF's in the same run), and a table that is not one is refused before any work."""
import subprocess
import sys

import pytest

from convnet.paths import CHECKOUT_ROOT as ROOT


def test_forward_rows_name_each_variant_and_hfs_anchors():
    from convnet.bench.gpt2 import forward_benchmark, forward_rows
    results = [{"variant": "fast", "total_ms": 14.4}, {"variant": "fast_bf16", "total_ms": 4.5},
               {"hf": {"fp32": 56.7, "tf32": 23.4, "bf16": 9.1, "bf16_compile": 6.98, "versions": "torch x"}}]
    rows = forward_rows(results, 8, 1024, None)
    bench = forward_benchmark(8, 1024, None)
    assert bench == "forward B=8 T=1024, random 124M weights (convnet-bench gpt2)"
    assert rows == [("fast", bench, 14.4, "ms"), ("fast_bf16", bench, 4.5, "ms"), ("HF fp32", bench, 56.7, "ms"),
                    ("HF TF32", bench, 23.4, "ms"), ("HF bf16", bench, 9.1, "ms"),
                    ("HF bf16 torch.compile", bench, 6.98, "ms")]
    assert forward_rows(results[:1], 1, 64, "/x/gpt2-medium")[0][1] == \
        "forward B=1 T=64, gpt2-medium (convnet-bench gpt2)"


def test_a_table_that_is_not_one_is_refused_before_the_gpu(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    p = subprocess.run([sys.executable, "-m", "convnet.bench.cli", "gpt2", "fast", "--record", str(notes)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "not a results table" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert notes.read_text() == "mine\n"


def test_megakernel_batches_past_eight_only_without_the_megakernel():
    """convnet-bench megakernel --batches 32: refused in one line while fast_bf16_mk (1 to 8 sequences) is among the
    variants, before any GPU work; the default variants (fast_bf16 and the dataflow kernel, which leaves batches past
    one to fast_bf16's steps) get past that check (to the GPU check here)."""
    cmd = [sys.executable, "-m", "convnet.bench.cli", "megakernel", "--sizes", "124M", "--batches", "8", "32"]
    p = subprocess.run([*cmd, "--variants", "fast_bf16", "fast_bf16_mk"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert p.returncode == 2 and "fast_bf16_mk" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    for extra in ([], ["--variants", "fast_bf16"]):
        p = subprocess.run([*cmd, *extra], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert "runs 1 to 8" not in p.stderr


def test_megakernel_bench_does_not_time_a_batch_its_persistent_kernel_leaves(monkeypatch):
    """megakernel_benchmark: at a batch the dataflow kernel does not take (past one sequence) its variant's steps are
    fast_bf16's, so the row says so instead of timing them again, and the sequences are compared only where both
    variants ran (the GPU stood in for by the generator's parts)."""
    from types import SimpleNamespace
    from convnet.bench import megakernel
    from convnet.gpt2 import dataflow, gpu, gpu_generate, model
    from convnet.gpt2.generate import Sampling
    from convnet.gpu import runtime

    def fake_gpu(params, config, variant):                # (decode "auto" as where it takes the dataflow kernel)
        decode = variant.params.get("decode")
        mega = SimpleNamespace(batch_refusal=dataflow.batch_refusal) if decode in ("dataflow", "auto") else None
        return SimpleNamespace(mega=mega, rt=SimpleNamespace(pool=SimpleNamespace(free=lambda: None)))

    timed = []

    def fake_rate(gen, prompts, new_tokens, repeat, sampling):
        timed.append(len(prompts))
        return 1000.0 * len(prompts), [[1, 2]] * len(prompts)

    monkeypatch.setattr(runtime.Runtime, "get", staticmethod(lambda: SimpleNamespace(name="NVIDIA H200")))
    monkeypatch.setattr(gpu, "GPT2GPU", fake_gpu)
    monkeypatch.setattr(gpu_generate, "GPUGenerator", lambda g: SimpleNamespace(gpu=g))
    monkeypatch.setattr(model, "random_params", lambda config, seed=0: None)
    monkeypatch.setattr(megakernel, "_rate", fake_rate)
    table, rows = megakernel.megakernel_benchmark(("124M",), (1, 8), hf=False)
    assert timed == [1, 8, 1]
    skipped = [r for r in rows if r["what"] == "fast_bf16_df" and "value" in r]
    assert [r["B"] for r in skipped] == [8] and "not timed" in skipped[0]["value"]
    assert [r["B"] for r in rows if r["what"].startswith("sequences equal")] == [1]
    assert "| 124M | 8 | fast_bf16_df | not timed" in table and table.startswith("Decode (greedy)")
    assert [r["what"] for r in rows if "tok_s" in r] == ["fast_bf16@decode=steps"] * 2 + ["fast_bf16_df"]
    # fast_bf16 (decode "auto") runs the steps past one sequence: timed at every batch
    timed.clear()
    _, rows = megakernel.megakernel_benchmark(("124M",), (1, 8), hf=False, variants=("fast_bf16", "fast_bf16_df"))
    assert timed == [1, 8, 1] and [r["B"] for r in rows if r["what"] == "fast_bf16" and "tok_s" in r] == [1, 8]
    table, _ = megakernel.megakernel_benchmark(("124M",), (1,), hf=False,
                                               sampling=Sampling(0.8, top_p=0.9, repetition_penalty=1.2))
    assert table.startswith("Decode (temperature 0.8, top-p 0.9, repetition penalty 1.2)")


@pytest.mark.parametrize("spec,message", [("fast_bf16@X", "expected NAME@KEY=VALUE"),
                                          ("nosuch", "unknown gpt2 variant 'nosuch'"),
                                          ("fast_bf16_mk@MK_SLOTS=4", "runs 1 to 8"),
                                          ("fast_bf16@decode=bogus", "param decode = 'bogus' is not one of"),
                                          ("fast_bf16@decode_fold=3", "should be a bool")])
def test_megakernel_variant_specs_are_checked_before_any_gpu_work(spec, message):
    """--variants takes NAME@KEY=V,...: a malformed spec, an unknown name or a param the catalogue would refuse is one
    line and exit 2, and a megakernel spec counts as the megakernel for the batch check, all before the GPU check."""
    cmd = [sys.executable, "-m", "convnet.bench.cli", "megakernel", "--sizes", "124M", "--batches", "1", "32",
           "--variants", "fast_bf16", spec]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_megakernel_trace_samples_only_in_the_dataflow_kernel():
    """--trace with sampling options: the megakernel's trace is greedy, so that is one line and exit 2 before the GPU
    check; with the dataflow kernel among --variants it goes on to the GPU check (no GPU here: its own line)."""
    base = [sys.executable, "-m", "convnet.bench.cli", "megakernel", "--sizes", "124M", "--batches", "1", "--trace",
            "--temperature", "0.8", "--top-p", "0.9", "--variants"]
    p = subprocess.run(base + ["fast_bf16_mk"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "samples only in the dataflow kernel" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    p = subprocess.run(base + ["fast_bf16_df"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "samples only" not in p.stderr
