"""Session 19 lead: trial variants = fast_bf16 with extra prefill_group_defines, written to trials.toml beside this
file (copied into milestones/zz_trials.toml for the device calls only)."""
import copy
import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
TRIALS = {   # name: (title, {group: {constant: value}} added to fast_bf16's prefill_group_defines)
    "t19a": ("mlp_proj's A boxes 8 k tiles ahead to L2", {"mlp_proj": {"BF_L2_PF_A": 8}}),
    "t19b": ("t19a + the LM head's W^T boxes 8 ahead", {"mlp_proj": {"BF_L2_PF_A": 8}, "lm_head": {"BF_L2_PF_B": 8}}),
    "t19c": ("A 8 ahead in every prefill group, the LM head's W^T 8 ahead",
             {g: {"BF_L2_PF_A": 8} for g in ("qkv", "attn_proj", "mlp_fc", "mlp_proj")} | {"lm_head": {"BF_L2_PF_B": 8}}),
    "t19d": ("the projections without BF_RESID_PF (the producer's per-row residual prefetch)",
             {"attn_proj": {"BF_RESID_PF": 0}, "mlp_proj": {"BF_RESID_PF": 0}}),
    "t19e": ("t19d + mlp_proj on BF_PP (4 chunk buffers a warpgroup)",
             {"attn_proj": {"BF_RESID_PF": 0}, "mlp_proj": {"BF_RESID_PF": 0, "BF_PP": 1, "BF_EPI_TMA_BUFS": 4}}),
    "t19f": ("t19d + attn_proj on the cooperative TMA epilogue (4 stages, 3 chunk buffers)",
             {"attn_proj": {"BF_RESID_PF": 0, "BF_PP": 0, "BF_EPI_TMA_BUFS": 3}, "mlp_proj": {"BF_RESID_PF": 0}}),
    # session 19 call 4, on fast_bf16 as of call 3 (t19e's settings)
    "t19g": ("attn_proj's tiles in groups of 8 row tiles (BF_GROUP 8, not 32)", {"attn_proj": {"BF_GROUP": 8}}),
    "t19h": ("attn_proj's tiles in groups of 64 row tiles", {"attn_proj": {"BF_GROUP": 64}}),
    "t19i": ("attn_proj at BF_BN 128 (5 stages, 2 chunk buffers a warpgroup)",
             {"attn_proj": {"BF_BN": 128, "BF_STAGES": 5, "BF_EPI_TMA_BUFS": 2}}),
}


def toml_value(v):
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def main(names):
    base = tomllib.loads((ROOT / "milestones/gpt2.toml").read_text())["variant"]["fast_bf16"]
    out = ["# Session 19 lead trials; copied into milestones/zz_trials.toml for the device calls only", 'model = "gpt2"', ""]
    for name in names or TRIALS:
        title, extra = TRIALS[name]
        v = copy.deepcopy(base)
        for g, d in extra.items():
            v["params"]["prefill_group_defines"].setdefault(g, {}).update(d)
        v.update(title=f"fast_bf16 trial: {title} (s19 lead)", changes="trial", expected="-")
        out.append(f"[variant.{name}]")
        out += [f"{k} = {toml_value(x)}" for k, x in v.items()]
        out.append("")
    (HERE / "trials.toml").write_text("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
