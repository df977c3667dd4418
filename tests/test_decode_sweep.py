"""convnet.bench.decode_sweep (bench-generate --variants) on the CPU: the names it takes and refuses, the table it
prints, and the command line reaching it (the GPU run itself is a benchmark, not a test)."""
import pytest

from convnet.bench import decode_sweep
from convnet.errors import UsageError
from convnet.gpt2.__main__ import main


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
    assert main(["bench-generate", "--variants", "fast,fast_pdl", "--batch", "16", "--repeat", "2"]) == 0
    assert seen == {"names": "fast,fast_pdl", "batch": 16, "prompt_len": 64, "new_tokens": 256, "repeat": 2}
    assert capsys.readouterr().out.strip() == "table"


def test_command_line_refuses_a_bad_name_before_loading(monkeypatch, capsys):
    monkeypatch.setattr(decode_sweep, "sweep_benchmark", lambda *a: pytest.fail("ran"))
    assert main(["bench-generate", "--variants", "fast,bogus"]) != 0
    assert "bogus" in capsys.readouterr().err
