"""Session 23 lead: trial variants = fast_bf16_xb (the bf16 residual stream) with extra prefill_group_defines, written
to trials.toml beside this file (copied into milestones/zz_trials.toml for the device calls only; convnet.bench.trials
writes it). With a bf16 C the projections' reduce-adds stage and move half the bytes, so their constants, tuned on an
fp32 C, are tried again."""
import sys
from pathlib import Path

from convnet.bench.trials import write_trials

HERE = Path(__file__).resolve().parent
TRIALS = {   # name: (title, {group: {constant: value}} added to fast_bf16_xb's prefill_group_defines, params added)
    "t23a": ("both projections with 3 epilogue chunk buffers", {"attn_proj": {"BF_EPI_TMA_BUFS": 3},
                                                                "mlp_proj": {"BF_EPI_TMA_BUFS": 3}}, {}),
    "t23b": ("attn_proj in groups of 16 row tiles", {"attn_proj": {"BF_GROUP": 16}}, {}),
    "t23c": ("mlp_proj in groups of 32 row tiles", {"mlp_proj": {"BF_GROUP": 32}}, {}),
    # the producer's per-row L2 prefetch of the tile's residual (session 11; taken out of the projections' prefill builds
    # in session 19 with an fp32 C): half the bytes now
    "t23d": ("both projections with BF_RESID_PF=1", {"attn_proj": {"BF_RESID_PF": 1}, "mlp_proj": {"BF_RESID_PF": 1}}, {}),
    # (call 5, H100: t23a-c within 0.3 % of fast_bf16_xb queued, t23d 3.6 % slower (attn_proj 29.3 vs 24.3 us); none kept)
    # the 25 LayerNorms take 0.383 ms a forward, about twice their bytes' time at HBM rate: session 17's resident grid
    # (warps striding over the rows, the next row prefetched), now over bf16 rows
    "t23e": ("LayerNorm on a grid of resident blocks (ln_resident)", {}, {"ln_resident": True}),
    # (call 6, H100: 0.993x of fast_bf16_xb queued, LayerNorms 0.378 vs 0.388 ms a forward; not kept)
    # call 10 (ncu): layernorm_warp_bf16_xb takes 16.1 us for 12.6 MB, DRAM 23 % busy: gamma and beta came from global
    # memory in the output loop. transformer.cu LN_SMEM_GB=1 (now the default) stages them in shared memory; these two
    # trials are the LayerNorm as it was, for the A/B
    "t23f": ("the LayerNorm without the shared-memory gamma / beta (LN_SMEM_GB=0, as before session 23)", {},
             {"LN_SMEM_GB": 0}),
    # (call 11, H100: fast_bf16_xb 4.374 vs t23f 4.438 ms queued; fast_bf16 4.672 vs t23g 4.678; LN_SMEM_GB kept)
    # ncu, call 10: 43-48 registers hold the LayerNorm at 5 blocks of 256 an SM (1.55 waves for 8192 rows); with launch
    # bounds of 6 blocks ptxas fits it in 40 registers without spilling (1.29 waves)
    "t23h": ("the LayerNorm at launch bounds (256, 6)", {}, {"LN_MIN_BLOCKS": 6}),
    # (call 14, H100: t23h 0.999x of fast_bf16_xb queued, t23i 1.003x of fast_bf16; ncu 14.4-14.8 us a LayerNorm at 40
    # registers and 6 blocks: occupancy is not what holds it. LN_MIN_BLOCKS taken out again: ln_min_blocks.diff)
}

if __name__ == "__main__":
    write_trials("fast_bf16_xb", TRIALS, HERE / "trials.toml", "Session 23 lead", sys.argv[1:])
    # the same LayerNorm trial over fast_bf16 (fp32 rows)
    write_trials("fast_bf16", {"t23g": TRIALS["t23f"], "t23i": TRIALS["t23h"]}, HERE / "trials_fp32_stream.toml",
                 "Session 23 lead")
