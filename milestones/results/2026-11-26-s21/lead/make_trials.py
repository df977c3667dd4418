"""Session 21 lead: trial variants = fast_bf16 with extra prefill_group_defines, written to trials.toml beside this
file (copied into milestones/zz_trials.toml for the device calls only)."""
import copy
import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
TRIALS = {   # name: (title, {group: {constant: value}} added to fast_bf16's prefill_group_defines, params added)
    # session 21: the LayerNorm fold (gemm.cu BF_LNS, param ln_fold). Its ping-pong residual GEMMs at BF_BN 192 spilled
    # (the fold's epilogue beside 192 live accumulators), so: ping-pong at BF_BN 128, or cooperative at 192 (3 stages)
    "t21a": ("ln_fold, the residual GEMMs on BF_PP at BF_BN 128",
             {"attn_proj": {"BF_LNS": 1, "BF_BN": 128}, "mlp_proj": {"BF_LNS": 1, "BF_BN": 128},
              "qkv": {"BF_LNS": 2, "BF_LNS_PART": 128}, "mlp_fc": {"BF_LNS": 2, "BF_LNS_PART": 128},
              "lm_head": {"BF_LNS": 2, "BF_LNS_PART": 128}}, {"ln_fold": True}),
    "t21b": ("ln_fold, the residual GEMMs cooperative at BF_BN 192, 3 stages",
             {"attn_proj": {"BF_LNS": 1, "BF_PP": 0, "BF_STAGES": 3}, "mlp_proj": {"BF_LNS": 1, "BF_PP": 0, "BF_STAGES": 3},
              "qkv": {"BF_LNS": 2}, "mlp_fc": {"BF_LNS": 2}, "lm_head": {"BF_LNS": 2}}, {"ln_fold": True}),
    "t21c": ("no fold: the residual GEMMs on BF_PP at BF_BN 128 (t21a's tile without BF_LNS)",
             {"attn_proj": {"BF_BN": 128}, "mlp_proj": {"BF_BN": 128}}, {}),
    "t21d": ("t21a's builds without ln_fold (the BF_LNS builds' plain epilogues, LayerNorm kernels)",
             {"attn_proj": {"BF_LNS": 1, "BF_BN": 128}, "mlp_proj": {"BF_LNS": 1, "BF_BN": 128},
              "qkv": {"BF_LNS": 2, "BF_LNS_PART": 128}, "mlp_fc": {"BF_LNS": 2, "BF_LNS_PART": 128},
              "lm_head": {"BF_LNS": 2, "BF_LNS_PART": 128}}, {}),
    "t21e": ("t21a at the production register split (BF_LNS_REGS=0: producer 40, consumers 232)",
             {"attn_proj": {"BF_LNS": 1, "BF_BN": 128, "BF_LNS_REGS": 0}, "mlp_proj": {"BF_LNS": 1, "BF_BN": 128, "BF_LNS_REGS": 0},
              "qkv": {"BF_LNS": 2, "BF_LNS_PART": 128, "BF_LNS_REGS": 0}, "mlp_fc": {"BF_LNS": 2, "BF_LNS_PART": 128, "BF_LNS_REGS": 0},
              "lm_head": {"BF_LNS": 2, "BF_LNS_PART": 128, "BF_LNS_REGS": 0}}, {"ln_fold": True}),
}


def toml_value(v):
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def main(names):
    base = tomllib.loads((ROOT / "milestones/gpt2.toml").read_text())["variant"]["fast_bf16"]
    out = ["# Session 21 lead trials; copied into milestones/zz_trials.toml for the device calls only", 'model = "gpt2"', ""]
    for name in names or TRIALS:
        title, extra, params = TRIALS[name]
        v = copy.deepcopy(base)
        for g, d in extra.items():
            v["params"]["prefill_group_defines"].setdefault(g, {}).update(d)
        v["params"].update(params)
        v.update(title=f"fast_bf16 trial: {title} (s21 lead)", changes="trial", expected="-")
        out.append(f"[variant.{name}]")
        out += [f"{k} = {toml_value(x)}" for k, x in v.items()]
        out.append("")
    (HERE / "trials.toml").write_text("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
