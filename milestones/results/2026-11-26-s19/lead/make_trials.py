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
    # session 19 call 5: the LM head's tile order. At BF_GROUP 8 the 132 tiles in flight are 8 row tiles x ~16
    # column tiles, and W^T's 77 MB come from DRAM once per group of 8 row tiles (8 times); at 64, once.
    "t19j": ("the LM head's tiles in one group of 64 row tiles (W^T from DRAM once)", {"lm_head": {"BF_GROUP": 64}}),
    "t19k": ("the LM head's tiles in groups of 32 row tiles", {"lm_head": {"BF_GROUP": 32}}),
    "t19l": ("the LM head's tiles in groups of 16 row tiles", {"lm_head": {"BF_GROUP": 16}}),
    # session 19 call 6: no spilling builds (the ping-pong projections without BF_RESID_PF spill 32 bytes: ptxas keeps
    # two tile counts in local memory), so attn_proj back to session 18's setting, mlp_proj cooperative without the
    # residual prefetch; the LM head in groups of 16 / 12 / 24 row tiles
    "t19m": ("attn_proj as session 18, mlp_proj cooperative without BF_RESID_PF, the LM head in groups of 16",
             {"attn_proj": {"BF_RESID_PF": 1}, "mlp_proj": {"BF_PP": 0, "BF_EPI_TMA_BUFS": 3}, "lm_head": {"BF_GROUP": 16}}),
    "t19n": ("t19m with the LM head in groups of 12",
             {"attn_proj": {"BF_RESID_PF": 1}, "mlp_proj": {"BF_PP": 0, "BF_EPI_TMA_BUFS": 3}, "lm_head": {"BF_GROUP": 12}}),
    "t19o": ("t19m with the LM head in groups of 24",
             {"attn_proj": {"BF_RESID_PF": 1}, "mlp_proj": {"BF_PP": 0, "BF_EPI_TMA_BUFS": 3}, "lm_head": {"BF_GROUP": 24}}),
    # session 19 call 9, on fast_bf16 as committed (12eda3a): the other groups' tile order at 16 row tiles a group
    "t19p": ("mlp_fc in groups of 16 row tiles", {"mlp_fc": {"BF_GROUP": 16}}),
    "t19q": ("mlp_proj in groups of 16 row tiles", {"mlp_proj": {"BF_GROUP": 16}}),
    "t19r": ("qkv in groups of 16 row tiles", {"qkv": {"BF_GROUP": 16}}),
    "t19s": ("attn_proj in groups of 16 row tiles (not 32)", {"attn_proj": {"BF_GROUP": 16}}),
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
