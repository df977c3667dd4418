#!/bin/bash
# Lead call 8, session 13 (H100): Nsight Compute durations of cuBLAS bf16 as HF GPT-2 calls it (torch.addmm with the
# bias, x @ W with W (in, out); the LM head F.linear(x, wte)), M = 8192, for all five GEMM shapes: the in-kernel
# anchors for v8 (call 4 timed ours).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cat > /tmp/hf_gemms.py <<'PY'
import torch
import torch.nn.functional as F
x = {k: torch.randn(8192, k, device="cuda", dtype=torch.bfloat16) for k in (768, 3072)}
for name, k, n in (("qkv", 768, 2304), ("attn_proj", 768, 768), ("mlp_fc", 768, 3072), ("mlp_proj", 3072, 768)):
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * 0.02
    b = torch.zeros(n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.addmm(b, x[k], w)
wte = torch.randn(50257, 768, device="cuda", dtype=torch.bfloat16) * 0.02
for _ in range(3):
    F.linear(x[768], wte)
torch.cuda.synchronize()
PY
timeout 200 ncu --clock-control none --section SpeedOfLight --kernel-name regex:"gemm|nvjet|sm90|cutlass" \
  python3 /tmp/hf_gemms.py > "$OUT/01_hf_gemms.txt" 2>&1; echo "rc $?"
grep -E "^  [a-zA-Z_0-9]+.*\(|Duration" "$OUT/01_hf_gemms.txt" | cut -c1-120
