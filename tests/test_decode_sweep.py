"""convnet.bench.decode_sweep (convnet-bench generate --variants) on the CPU: the names it takes and refuses, the table it
prints, and the command line reaching it (the GPU run itself is a benchmark, not a test)."""
import pytest

from convnet.bench import decode_sweep
from convnet.errors import UsageError
from convnet.bench.cli import main


def test_parse_variants_keeps_order():
    got = decode_sweep.parse_variants("fast, fast_pdl,fast_pdl_lns_red")
    assert [v.name for v in got] == ["fast", "fast_pdl", "fast_pdl_lns_red"]


@pytest.mark.parametrize("text,msg", [("", "at least one"), (" , ", "at least one"), ("fast,fast", "more than once"),
                                      ("fast,nope", "unknown gpt2 variant 'nope'"), ("fast,cpu", "GPU variants only")])
def test_parse_variants_refuses_in_one_line(text, msg):
    with pytest.raises(UsageError, match=msg) as e:
        decode_sweep.parse_variants(text)
    assert "\n" not in str(e.value)


def test_rates_table_relative_to_the_first():
    rows = [{"name": "fast", "batched": (30000.0, 29000.0), "one": (2400.0, 2300.0), "same_batched": "32/32",
             "same_one": "1/1"},
            {"name": "fast_pdl", "batched": (33000.0, 31000.0), "one": (2410.0, 2310.0), "same_batched": "31/32",
             "same_one": "1/1"}]
    t = decode_sweep.rates_table(rows, {"HF generate (TF32), B=32 x 64 greedy (wall)": 3600.0}, 32, 64)
    lines = t.splitlines()
    assert "B=32 x 64 steady tok/s" in lines[0] and "vs fast" in lines[0]
    assert "1.100x" in lines[3] and "31/32" in lines[3] and "1.000x" in lines[2]
    assert lines[4].startswith("| HF generate (TF32)") and "3600" in lines[4]


def test_command_line_reaches_the_sweep(monkeypatch, capsys):
    seen = {}

    def fake(names, batch, prompt_len, new_tokens, repeat):
        seen.update(names=names, batch=batch, prompt_len=prompt_len, new_tokens=new_tokens, repeat=repeat)
        return "table"
    monkeypatch.setattr(decode_sweep, "sweep_benchmark", fake)
    monkeypatch.setattr("convnet.gpu.available", lambda: (True, "a GPU stand-in"))
    assert main(["generate", "--variants", "fast,fast_pdl", "--batch", "16", "--repeat", "2"]) == 0
    assert seen == {"names": "fast,fast_pdl", "batch": 16, "prompt_len": 64, "new_tokens": 256, "repeat": 2}
    assert capsys.readouterr().out.strip() == "table"


def test_command_line_refuses_a_bad_name_before_loading(monkeypatch, capsys):
    monkeypatch.setattr(decode_sweep, "sweep_benchmark", lambda *a: pytest.fail("ran"))
    assert main(["generate", "--variants", "fast,bogus"]) != 0
    assert "bogus" in capsys.readouterr().err


def test_sweep_runs_rounds_in_both_orders_and_splits_a_step(monkeypatch):
    """The sweep's control flow without a GPU: round 1 in the given order, round 2 reversed, medians over both
    rounds, the per-round rates, tokens compared with the first variant, one step split per variant."""
    import convnet.bench.gpt2 as bg
    import convnet.gpt2.gpu as gg
    import convnet.gpt2.gpu_generate as gen
    from convnet.gpt2.gpu import GROUPS
    order = []

    class FakeGPU:
        def __init__(self, params, config, v):
            self.variant, self.rt = v, type("rt", (), {"name": "Fake GPU"})()
            order.append(v.name)

        def decode_step_groups(self, cap, B=1):
            return {g: 1e-3 for g in GROUPS}

    class FakeGen:
        def __init__(self, gpu):
            self.gpu = gpu

    rates = {"fast": [100.0, 120.0], "fast_pdl": [200.0, 220.0]}

    def fake_rates(g, prompts, new_tokens, sampling, repeat):
        name = g.gpu.variant.name
        steady = rates[name][order.count(name) - 1] / (10 if len(prompts) == 1 else 1)
        ids = [[1, 2]] * len(prompts) if name == "fast" else [[1, 3]] + [[1, 2]] * (len(prompts) - 1)
        return steady / 2, steady, ids
    monkeypatch.setattr(bg, "load_model", lambda c: ({}, None, "fake model"))
    monkeypatch.setattr(bg, "bench_prompts", lambda config, b, t: ([[0]], [[0]] * b))
    monkeypatch.setattr(bg, "generation_rates", fake_rates)
    monkeypatch.setattr(gg, "GPT2GPU", FakeGPU)
    monkeypatch.setattr(gen, "GPUGenerator", FakeGen)
    out = decode_sweep.sweep_benchmark("fast,fast_pdl", batch=4, repeat=1, hf=False, rounds=2)
    assert order == ["fast", "fast_pdl", "fast_pdl", "fast"]
    assert "Fake GPU" in out and "2 rounds" in out
    row = next(line for line in out.splitlines() if line.startswith("| fast_pdl "))
    assert "| 210 " in row and "| 21 " in row and "3/4" in row and "200 / 20, 220 / 22" in row
    assert "one B=4 decode step" in out and "| sum" in out
