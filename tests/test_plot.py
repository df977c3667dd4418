import json

import pytest

from convnet.bench import plot


def test_compare_chart_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    results = {"batch": 100, "results": [
        {"variant": "a", "device": "GPU", "op_ms": [1.0, 2.0], "total_ms": 5.0},
        {"variant": "b", "device": "GPU", "op_ms": [0.1, 0.2], "total_ms": 0.5}]}
    src, out = tmp_path / "r.json", tmp_path / "r.png"
    src.write_text(json.dumps(results))
    assert plot.main([str(src), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_results_file_is_one_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert plot.main([str(bad), "-o", str(tmp_path / "x.png")]) == 2
    assert "cannot read results JSON" in capsys.readouterr().err
