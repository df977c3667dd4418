"""The catalogue's `base`: a variant states only what it changes; the README's example is a working variant."""
import re
import tomllib

import pytest

from convnet import catalogue
from convnet.paths import CHECKOUT_ROOT


def resolve(tables: dict, name: str) -> catalogue.Variant:
    merged = catalogue._resolve(name, tables, "test")
    return catalogue._parse(name, merged, "test", "gpt2", False)


def current_tables() -> dict:
    return {n: tomllib.loads((catalogue.MILESTONES_DIR / "gpt2.toml").read_text())["variant"][n]
            for n in catalogue.load_all("gpt2")}


def test_the_readme_example_inherits_its_base():
    block = re.search(r"```toml\n(.*?)```", (CHECKOUT_ROOT / "README.md").read_text(), re.S).group(1)
    example = tomllib.loads(block)["variant"]
    (name, table), = example.items()
    tables = {**current_tables(), name: table}
    v, base = resolve(tables, name), catalogue.get(table["base"], "gpt2")
    assert v.defines == {**base.defines, **table["defines"]} and v.params == base.params
    assert v.backend == base.backend and v.min_sm == base.min_sm and v.precision == base.precision
    assert not v.main and v.title == table["title"]


def test_a_base_chain_that_loops_or_names_nothing_is_refused():
    t = {"a": {"base": "b", "title": "a"}, "b": {"base": "a", "title": "b"}}
    with pytest.raises(ValueError, match="loops"):
        catalogue._resolve("a", t, "test")
    with pytest.raises(ValueError, match="unknown base 'nope'"):
        catalogue._resolve("c", {"c": {"base": "nope"}}, "test")


def test_archived_variants_are_found_by_name_but_not_listed():
    current, every = catalogue.load_all("gpt2"), catalogue.load_all("gpt2", archive=True)
    archived = set(every) - set(current)
    assert "fast_bf16_s19" in archived and "fast_bf16" in current
    assert catalogue.get("fast_bf16_s19", "gpt2").archived and not catalogue.get("fast_bf16", "gpt2").archived
    for model in catalogue.MODELS:          # nothing current falls back to an archived variant
        for v in catalogue.load_all(model).values():
            assert not v.fallback or not catalogue.get(v.fallback, model).archived, v.name


@pytest.mark.parametrize("params,message", [({"atention": "flash"}, "unknown GPT-2 param 'atention'"),
                                            ({"split_k": 1}, "param split_k = 1 should be a bool"),
                                            ({"flash_warps": "4"}, "param flash_warps = '4' should be a int"),
                                            ({"attention": "fast"}, "param attention = 'fast' is not one of ('naive', 'flash')")])
def test_a_mistyped_gpt2_param_is_refused_naming_the_variant(params, message):
    tables = {"mine": {"base": "fast", "title": "t", "changes": "c", "expected": "e", "params": params},
              **current_tables()}
    with pytest.raises(ValueError, match=re.escape(f"variant 'mine': {message}")):
        resolve(tables, "mine")
