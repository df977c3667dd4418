"""Session 25 lead: trials over fast_bf16_mma (the mma.sync path, for GPUs before Hopper), written to trials.toml beside
this file (copied into milestones/zz_trials.toml for the device calls only; convnet.bench.trials writes it)."""
import sys
from pathlib import Path

from convnet.bench.trials import write_trials

HERE = Path(__file__).resolve().parent
TRIALS = {   # name: (title, {group: {constant: value}} added to prefill_group_defines, params added)
    # attention.cu FB_LEAN=1 (now the default) trims flash_attention_bf16's key loop as FW_LEAN did the wgmma kernel's;
    # this is the loop as before, for the A/B
    "t25a": ("flash_attention_bf16's loop as before session 25 (FB_LEAN=0)", {}, {"flash_defines": {"FB_LEAN": 0}}),
    # (call 3, H100: fast_bf16_mma 12.151 vs t25a 12.261 ms queued (1.009x); bench-attention 0.095 vs 0.102 ms for the
    # 4 warps x 2 strips, 3 stages build, SDPA bf16 0.090: FB_LEAN kept)
}

if __name__ == "__main__":
    write_trials("fast_bf16_mma", TRIALS, HERE / "trials.toml", "Session 25 lead", sys.argv[1:])
