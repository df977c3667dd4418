"""convnet.bench.forward_ab's round orders, its table, and its refusal of an unknown variant (CPU)."""
from convnet.bench import forward_ab


def test_rounds_alternate_the_order():
    assert forward_ab.round_orders(["a", "b", "c"], 3) == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"]]


def test_summary_takes_medians_over_rounds_and_ratios_to_the_first():
    rows = forward_ab.summarize(["a", "b"], {"a": [(7.0, 6.0), (9.0, 6.2), (8.0, 6.4)],
                                             "b": [(6.0, 5.0), (6.5, 5.2), (9.0, 4.8)]})
    assert rows[0][:3] == ["a", 8.0, 6.2] and rows[1][:3] == ["b", 6.5, 5.0]
    assert rows[1][3] == "5.000 / 5.200 / 4.800" and rows[1][4] == f"{6.2 / 5.0:.3f}x" and rows[0][4] == "1.000x"


def test_unknown_variant_refused_in_one_line(capsys):
    assert forward_ab.main(["--variants", "no_such_variant"]) == 2
    err = capsys.readouterr().err
    assert "unknown gpt2 variant 'no_such_variant'" in err and len(err.strip().splitlines()) == 1
