"""convnet-bench attention's --only: a pattern that is not a regular expression, or matches no flash build, is
refused in one line before any GPU work; the filter keeps the builds whose labels match."""
import pytest

from convnet.bench import gpt2 as bg
from convnet.bench.cli import main


@pytest.mark.parametrize("pattern,why", [("(", "not a regular expression"),
                                         ("no such build", "matches no flash build")])
def test_only_refuses_in_one_line_before_the_gpu(pattern, why, monkeypatch, capsys):
    import convnet.gpu.runtime as runtime
    monkeypatch.setattr(runtime.Runtime, "get", classmethod(lambda cls: pytest.fail("reached the GPU")), raising=False)
    assert main(["attention", "--only", pattern]) != 0
    err = capsys.readouterr().err.strip()
    assert why in err and "\n" not in err


def test_only_is_a_case_insensitive_search_over_the_labels():
    fp32, bf16 = bg.flash_builds("WGMMA: 2 warpgroups x 64|fb_lean")
    assert not fp32
    assert list(bf16) == ["bf16 tensor cores (m16n8k16): 4 warps x 2 strips, Q from shared, 3 stages, FB_LEAN=0",
                          "bf16 wgmma: 2 warpgroups x 64 queries, 64-key tiles"]
    assert (bg.FLASH_BENCH, bg.FLASH_BF16_BENCH) == bg.flash_builds(None) == bg.flash_builds("")
