"""Session 20 lead: trial variants = fast_bf16 with extra prefill_group_defines, written to trials.toml beside this
file (copied into milestones/zz_trials.toml for the device calls only)."""
import copy
import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
TRIALS = {   # name: (title, {group: {constant: value}} added to fast_bf16's prefill_group_defines)
    # session 20 call 1: gemm.cu's walk recomputed per tile (no spill), so session 19's t19e settings compile cleanly
    "t20a": ("mlp_proj on BF_PP without BF_RESID_PF (4 chunk buffers a warpgroup)",
             {"mlp_proj": {"BF_PP": 1, "BF_EPI_TMA_BUFS": 4}}),
    "t20b": ("t20a + attn_proj without BF_RESID_PF",
             {"mlp_proj": {"BF_PP": 1, "BF_EPI_TMA_BUFS": 4}, "attn_proj": {"BF_RESID_PF": 0}}),
}


def toml_value(v):
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def main(names):
    base = tomllib.loads((ROOT / "milestones/gpt2.toml").read_text())["variant"]["fast_bf16"]
    out = ["# Session 20 lead trials; copied into milestones/zz_trials.toml for the device calls only", 'model = "gpt2"', ""]
    for name in names or TRIALS:
        title, extra = TRIALS[name]
        v = copy.deepcopy(base)
        for g, d in extra.items():
            v["params"]["prefill_group_defines"].setdefault(g, {}).update(d)
        v.update(title=f"fast_bf16 trial: {title} (s20 lead)", changes="trial", expected="-")
        out.append(f"[variant.{name}]")
        out += [f"{k} = {toml_value(x)}" for k, x in v.items()]
        out.append("")
    (HERE / "trials.toml").write_text("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
