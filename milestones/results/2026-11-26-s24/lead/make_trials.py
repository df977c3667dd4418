"""Session 24 lead: LayerNorm trials over fast_bf16_xb (the bf16 residual stream) and fast_bf16 (fp32 rows), written
to trials.toml / trials_fp32_stream.toml beside this file (copied into milestones/zz_trials.toml for the device calls
only; convnet.bench.trials writes them). Session 23 found the LayerNorm latency-bound (ncu: 14 us a call for 12.6 MB,
DRAM under a quarter busy; the resident grid and a sixth block an SM did not help)."""
import sys
from pathlib import Path

from convnet.bench.trials import write_trials

HERE = Path(__file__).resolve().parent
TRIALS = {   # name: (title, {group: {constant: value}} added to prefill_group_defines, params added)
    # a programmatic LayerNorm's block can start under the previous GEMM's tail: gamma / beta (weights) staged then
    "t24a": ("gamma / beta staged before the PDL wait (LN_GB_EARLY=1)", {}, {"ln_defines": {"LN_GB_EARLY": 1}}),
    # (call 1, H100: 1.003x of fast_bf16_xb queued; t24d, the same over fast_bf16, 1.014x: LN_GB_EARLY=1 now the default)
    # more loads in flight per warp: 80 registers, 3 blocks of 256 an SM, 1.3 waves at 8192 rows
    "t24b": ("2 rows per warp (ln_rows 2), LN_GB_EARLY=1", {}, {"ln_rows": 2, "ln_defines": {"LN_GB_EARLY": 1}}),
    # 128 registers, 2 blocks an SM: 8192 rows in one wave (256 blocks of 32 rows)
    "t24c": ("4 rows per warp (ln_rows 4), LN_GB_EARLY=1", {}, {"ln_rows": 4, "ln_defines": {"LN_GB_EARLY": 1}}),
    # (call 1, H100: t24b 0.987x, t24c 0.991x of fast_bf16_xb queued, t24e 1.006x of fast_bf16 but below t24d; ncu: 15.5 us
    # a LayerNorm at 4 rows per warp against 13.9: more loads in flight do not help. LN_ROWS and the ln_rows param taken
    # out again (ln_rows.diff); the rows above need that diff to run)
    # call 2: the LayerNorm as before session 24, for the A/B of the new default
    "t24f": ("gamma / beta staged after the PDL wait (LN_GB_EARLY=0, as before)", {}, {"ln_defines": {"LN_GB_EARLY": 0}}),
    # (call 2, H100: fast_bf16_xb 4.374 vs t24f 4.407 ms queued (1.007x), fast_bf16 4.639 vs t24g 4.703 (1.014x): kept)
    # call 2's ncu of flash_attention_bf16_wg: issue slots 55 % busy, the integer pipe the busiest (50 %). attention.cu
    # FW_LEAN=1 (now the default) trims the key loop; this is the loop as before, for the A/B
    "t24h": ("attention's key loop as in session 23 (FW_LEAN=0)", {}, {"flash_defines": {"FW_LEAN": 0}}),
    # (call 3, H100: fast_bf16_xb 4.274 vs t24h 4.401 ms queued (1.030x), fast_bf16 4.533 vs t24i 4.654 (1.027x);
    # bench-attention 0.078 vs 0.089 ms, SDPA bf16 0.093: FW_LEAN kept. Then FW_LEAN's descriptors as base + offset)
    # a tile's P V left running under the next tile's barrier, copies and S (FW_PV_DEFER; 3 or 4 K / V slots)
    "t24j": ("attention: P V waited at the next S, 3 stages (FW_PV_DEFER)", {},
             {"flash_defines": {"FW_STAGES": 3, "FW_PV_DEFER": 1}}),
    "t24k": ("attention: P V waited at the next S, 4 stages (FW_PV_DEFER)", {},
             {"flash_defines": {"FW_STAGES": 4, "FW_PV_DEFER": 1}}),
    "t24l": ("attention: 3 stages (the control for t24j)", {}, {"flash_defines": {"FW_STAGES": 3}}),
    # (call 4, H100: fast_bf16_xb 4.237 ms queued, t24h 0.970x, t24j 0.997x, t24k 0.995x, t24l 0.999x: FW_PV_DEFER does
    # not pay and is taken out again (pv_defer.diff); the descriptors as base + offset stay (every attention.cu build of
    # the tree afterwards has the SASS call 4 tested, function by function)
}

if __name__ == "__main__":
    write_trials("fast_bf16_xb", TRIALS, HERE / "trials.toml", "Session 24 lead", sys.argv[1:])
    write_trials("fast_bf16", {"t24d": TRIALS["t24a"], "t24e": TRIALS["t24c"], "t24g": TRIALS["t24f"],
                               "t24i": TRIALS["t24h"]},
                 HERE / "trials_fp32_stream.toml", "Session 24 lead")
