"""Session 22 lead: trial variants = fast_bf16 with extra prefill_group_defines, written to trials.toml beside this
file (copied into milestones/zz_trials.toml for the device calls only; convnet.bench.trials writes it)."""
import sys
from pathlib import Path

from convnet.bench.trials import write_trials

HERE = Path(__file__).resolve().parent
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



if __name__ == "__main__":
    write_trials("fast_bf16", TRIALS, HERE / "trials.toml", "Session 22 lead", sys.argv[1:])
