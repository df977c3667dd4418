"""Session 22 lead: trial variants = fast_bf16 with extra prefill_group_defines, written to trials.toml beside this
file (copied into milestones/zz_trials.toml for the device calls only)."""
import copy
import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
TRIALS = {   # name: (title, {group: {constant: value}} added to fast_bf16's prefill_group_defines, params added)
    # session 22: the residual GEMMs' TMA reduce-adds miss L2 in the forward (the stream was written two kernels back);
    # BF_RESID_PF=2 sends each tile's residual boxes to L2 over the k loop's last k tiles, one box per k tile
    "t22a": ("attn_proj with BF_RESID_PF=2", {"attn_proj": {"BF_RESID_PF": 2}}, {}),
    "t22b": ("mlp_proj with BF_RESID_PF=2", {"mlp_proj": {"BF_RESID_PF": 2}}, {}),
    "t22c": ("both projections with BF_RESID_PF=2", {"attn_proj": {"BF_RESID_PF": 2}, "mlp_proj": {"BF_RESID_PF": 2}}, {}),
    # (call 1: all three slower, BF_RESID_PF=2 taken out again: resid_pf2_with_cleanup.diff)
    # attn_proj in one wave: 256-row tiles (BF_BM 256 takes only the cooperative BF_EPI_SMEM epilogue), 128 tiles of
    # 256 x 192 on 132 SMs, W^T read 32 times instead of 64
    "t22d": ("attn_proj on 256-row tiles (cooperative, BF_EPI_SMEM, 3 stages)",
             {"attn_proj": {"BF_BM": 256, "BF_PP": 0, "BF_EPI_TMA": 0, "BF_EPI_SMEM": 1, "BF_STAGES": 3,
                            "BF_EPI_TMA_BUFS": 2, "BF_RESID_PF": 1}}, {}),
}


def toml_value(v):
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def main(names):
    base = tomllib.loads((ROOT / "milestones/gpt2.toml").read_text())["variant"]["fast_bf16"]
    out = ["# Session 22 lead trials; copied into milestones/zz_trials.toml for the device calls only", 'model = "gpt2"', ""]
    for name in names or TRIALS:
        title, extra, params = TRIALS[name]
        v = copy.deepcopy(base)
        for g, d in extra.items():
            v["params"]["prefill_group_defines"].setdefault(g, {}).update(d)
        v["params"].update(params)
        v.update(title=f"fast_bf16 trial: {title} (s22 lead)", changes="trial", expected="-")
        out.append(f"[variant.{name}]")
        out += [f"{k} = {toml_value(x)}" for k, x in v.items()]
        out.append("")
    (HERE / "trials.toml").write_text("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
