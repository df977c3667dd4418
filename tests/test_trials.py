"""convnet.bench.trials: trial variants written over a catalogue variant parse as variants, with the trial's
constants merged into the base's prefill group defines and nothing else of the base changed."""
import tomllib

from convnet import catalogue
from convnet.bench.trials import toml_value, write_trials


def test_trials_parse_as_variants_with_the_constants_merged(tmp_path):
    trials = {"tx": ("attn_proj at BF_BN 128", {"attn_proj": {"BF_BN": 128}, "new_group": {"BF_PP": 1}}, {"ln_fold": True}),
              "ty": ("unused", {}, {})}
    out = write_trials("fast_bf16", trials, tmp_path / "t.toml", "test", names=["tx"])
    doc = tomllib.loads(out.read_text())
    assert doc["model"] == "gpt2" and list(doc["variant"]) == ["tx"]
    v = catalogue._parse("tx", doc["variant"]["tx"], out.name, "gpt2")
    base = catalogue.get("fast_bf16", "gpt2")
    pre, base_pre = v.params["prefill_group_defines"], base.params["prefill_group_defines"]
    assert pre["attn_proj"] == {**base_pre["attn_proj"], "BF_BN": 128} and pre["new_group"] == {"BF_PP": 1}
    assert {g: d for g, d in pre.items() if g not in ("attn_proj", "new_group")} == \
        {g: d for g, d in base_pre.items() if g != "attn_proj"}
    assert v.params["ln_fold"] is True and v.defines == base.defines
    assert v.title == "fast_bf16 trial: attn_proj at BF_BN 128 (test)"
    assert base.params["prefill_group_defines"]["attn_proj"].get("BF_BN") != 128     # the catalogue's copy untouched


def test_upper_case_trial_keys_are_the_variants_constants(tmp_path):
    out = write_trials("fast_bf16", {"tz": ("no staging", {}, {"LN_SMEM_GB": 0, "ln_pdl": False})}, tmp_path / "t.toml",
                       "test")
    v = catalogue._parse("tz", tomllib.loads(out.read_text())["variant"]["tz"], out.name, "gpt2")
    base = catalogue.get("fast_bf16", "gpt2")
    assert v.defines == {**base.defines, "LN_SMEM_GB": 0} and v.params["ln_pdl"] is False
    assert "LN_SMEM_GB" not in v.params and "LN_SMEM_GB" not in base.defines


def test_toml_values():
    assert toml_value({"a": {"b": True, "c": 1.5}, "d": "x"}) == '{ a = { b = true, c = 1.5 }, d = "x" }'
