"""Trial variants for a device call: a catalogue variant with some of its GEMM groups' -D constants (or params)
changed, written as a catalogue file that the device call carries (milestones/zz_trials.toml, never committed) so
that forward_ab, gemm_groups and the tests can name the trials like any variant.

    from convnet.bench.trials import write_trials
    write_trials("fast_bf16", {"t22a": ("attn_proj with X", {"attn_proj": {"BF_X": 1}}, {})}, Path("trials.toml"),
                 label="s22 lead")

Each trial is (title, {group: {constant: value}} merged into the base's prefill_group_defines, {param: value} merged
into its params; upper-case keys there are the variant's own -D constants, as catalogue.with_setting takes them).
The session's own script keeps the list of what it tried; this module is the writing."""
import copy
import json
import tomllib
from pathlib import Path

from ..catalogue import MILESTONES_DIR


def toml_value(v) -> str:
    """v as an inline TOML value (dicts as inline tables)."""
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def trial_variant(base_name: str, base: dict, title: str, groups: dict, params: dict, label: str) -> dict:
    """Variant base_name's table (base) with the trial's group constants and params merged in."""
    v = copy.deepcopy(base)
    for group, defines in groups.items():
        v["params"].setdefault("prefill_group_defines", {}).setdefault(group, {}).update(defines)
    v["params"].update({k: x for k, x in params.items() if k.islower()})
    v["defines"] = {**v.get("defines", {}), **{k: x for k, x in params.items() if not k.islower()}}
    v.update(title=f"{base_name} trial: {title} ({label})", changes="trial", expected="-")
    return v


def write_trials(base_name: str, trials: dict, out: Path, label: str, names=None, milestone: str = "gpt2") -> Path:
    """Writes the named trials (default all) of `trials` over catalogue variant base_name to out."""
    base = tomllib.loads((MILESTONES_DIR / f"{milestone}.toml").read_text())["variant"][base_name]
    lines = [f"# {label} trials over {base_name}; copied into milestones/zz_trials.toml for the device calls only",
             f'model = "{milestone}"', ""]
    for name in names or trials:
        lines.append(f"[variant.{name}]")
        lines += [f"{k} = {toml_value(x)}" for k, x in trial_variant(base_name, base, *trials[name], label).items()]
        lines.append("")
    out.write_text("\n".join(lines))
    return out
