"""compute-sanitizer target for split_decode_finish (attention.cu, session 12 lead): decode_attention_split (fp32)
and decode_attention_split_bf16 on their kernel-level cases: one active block, several splits (partials and the
ticket), fewer splits than chunks, device positions under PDL. Prints each case's max error against float64."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

import test_gpu_attention_split_bf16 as bf                           # noqa: E402
import test_gpu_decode_split as fp                                   # noqa: E402

rng = np.random.default_rng(0)
for mod, D in ((fp, 64), (fp, 80), (bf, 64), (bf, 96)):
    for Tk, splits, defines, dev in ((5, None, {}, False), (300, None, {}, False), (1000, 3, {}, False),
                                     (333, None, {"PDL": 1}, True)):
        got, want = mod.run_split(rng, 2, 3, D, Tk, cap=Tk + 7, splits=splits, defines=defines, device_pos=dev)[:2]
        print(mod.__name__, D, Tk, splits, defines, float(np.abs(np.asarray(got, np.float64) - want).max()))
print("sanitize run done")
