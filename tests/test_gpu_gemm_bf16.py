"""The bf16 GEMMs (kernels/gemm.cu v8 bf16_wgmma, v9 bf16_mma, v10 GEMV for M <= 8) against float64 numpy of the bf16-rounded
operands: odd M, N, K, every epilogue (bias, ReLU/GELU, residual, in place, head-major QKV scatter into a KV
cache at an offset), bf16 and fp32 outputs. Outputs are poisoned with NaN first; v8 skips off Hopper."""
import numpy as np
import pytest

from convnet.gpt2 import model as ref
from convnet.gpu.bf16 import BF16, BF16_NAN, from_bf16, round_bf16, to_bf16
from helpers import rel_err

pytestmark = pytest.mark.gpu

VERSIONS = ("bf16_wgmma", "bf16_mma")
# every M in (1, 7, 129, 1000), N in (8, 72, 770, 2304), K in (8, 64, 776, 3072) at least twice, each M with
# several N and K; (129, 77, 72): an odd N (and odd ldc: unpaired stores)
SHAPES = [(1, 2304, 768), (7, 72, 8), (129, 770, 776), (1000, 2304, 64), (1000, 8, 3072), (129, 8, 64),
          (7, 770, 3072), (1, 72, 776), (1000, 770, 776), (129, 2304, 3072), (1, 8, 8), (7, 2304, 64),
          (1000, 72, 8), (129, 77, 72)]
FP32_TOL, BF16_TOL = 1e-4, 4e-3     # fp32 accumulation of exact products; + one bf16 rounding of the result


def linear(version, defines=None):
    from convnet.gpu.gemm import Linear
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    if version == "bf16_wgmma" and rt.arch != "sm_90a":
        pytest.skip(f"GEMM v8 (bf16_wgmma) needs sm_90a; this GPU is {rt.arch}")
    return rt, Linear(rt, version, defines or {}, "test")


def upload(rt, name, x, out_bf16):
    """x in the output's type: bf16 bits (uint16) or fp32."""
    return rt.pool.upload(name, to_bf16(x), BF16) if out_bf16 else rt.pool.upload(name, x)


def result(buf, out_bf16):
    return from_bf16(buf.get()) if out_bf16 else buf.get()


def poisoned(rt, name, shape, out_bf16):
    buf = rt.pool.get(name, shape, BF16 if out_bf16 else np.float32)
    buf.fill(BF16(BF16_NAN) if out_bf16 else np.float32("nan"))
    return buf


def operands(rt, lin, rng, M, N, K):
    """Random A (M x K) and W (K x N) on the device as bf16, and their bf16-rounded values in float64."""
    a, w = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    A = rt.pool.upload("test.bfA", to_bf16(a), BF16)
    W = rt.pool.upload("test.bfW", lin.layout(w), lin.w_dtype)
    return A, W, round_bf16(a).astype(np.float64), round_bf16(w).astype(np.float64)


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_bias_gelu_residual(version, out_bf16, M, N, K, rng):
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    rt, lin = linear(version)
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias = rng.standard_normal(N).astype(np.float32)
    r = rng.standard_normal((M, N)).astype(np.float32)
    R = upload(rt, "test.bfR", r, out_bf16)
    want = ref.gelu(a @ w + bias) + (round_bf16(r) if out_bf16 else r)
    for gemv in ((True, False) if M <= 8 else (True,)):        # M <= 8: the GEMV (v10), and the tile kernel too
        lin.bf_gemv = gemv
        C = poisoned(rt, "test.bfC", (M, N), out_bf16)
        lin(A, W, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU,
                                                              resid=R))
        rt.synchronize("bf16 linear")
        assert rel_err(result(C, out_bf16), want) <= (BF16_TOL if out_bf16 else FP32_TOL), f"GEMV {gemv}"


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("M,N,K", [(129, 770, 776), (1, 72, 8), (1000, 2304, 3072)])
def test_plain_product_and_strided_output(version, out_bf16, M, N, K, rng):
    """No epilogue; C a window of a wider buffer (ldc > N): the columns past N stay untouched."""
    rt, lin = linear(version)
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    ldc = N + 8
    C = poisoned(rt, "test.bfC", (M, ldc), out_bf16)
    lin(A, W, C, M, N, K, K, lin.ldb(K, N), ldc, out_bf16=out_bf16)
    rt.synchronize("bf16 linear")
    got = result(C, out_bf16)
    assert np.isnan(got[:, N:]).all(), "the GEMM wrote past column N"
    assert rel_err(got[:, :N], a @ w) <= (BF16_TOL if out_bf16 else FP32_TOL)


@pytest.mark.parametrize("version", VERSIONS)
def test_relu_and_residual_in_place(version, rng):
    """x = relu(A W + b) + x with C and resid the same buffer (the residual stream, fp32)."""
    from convnet.gpu.gemm import ACT_RELU, Epilogue
    rt, lin = linear(version)
    M, N, K = 300, 264, 200
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    x = rng.standard_normal((M, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    X = rt.pool.upload("test.bfX", x)
    lin(A, W, X, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_RELU,
                                                          resid=X))
    rt.synchronize("bf16 linear in place")
    assert rel_err(X.get(), np.maximum(a @ w + bias, 0) + x) <= FP32_TOL


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("B,T,H,D,pos,on_device", [(2, 67, 4, 32, 5, False), (3, 1, 12, 64, 9, True),
                                                   (1, 130, 3, 18, 0, False), (2, 5, 2, 7, 3, False)])
def test_head_major_qkv_into_the_cache(version, out_bf16, B, T, H, D, pos, on_device, rng):
    """pro_2's scatter: Q[b][h][t][d] (cap_q rows per head), K/V[b][h][pos + t][d] (cap_kv rows); everything else
    in Q and the cache stays as it was (poison). D = 7: odd head size, unpaired stores."""
    rt, lin = linear(version)
    check_qkv_scatter(rt, lin, rng, out_bf16, B, T, H, D, pos, 64, on_device)


def check_qkv_scatter(rt, lin, rng, out_bf16, B, T, H, D, pos, K, on_device=False, what="bf16 qkv scatter"):
    """lin's head-major scatter of A @ W + bias (A: B*T rows of K) into Q (cap_q = T + 3 rows per head) and a cache at
    pos (cap_kv = pos + T + 4; pos from the device with on_device) against float64; the rest stays poisoned."""
    from convnet.gpu.gemm import Epilogue
    M, N = B * T, 3 * H * D
    cap_q, cap_kv = T + 3, pos + T + 4
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias = rng.standard_normal(N).astype(np.float32)
    Q = poisoned(rt, "test.bfQ", (B, H, cap_q, D), out_bf16)
    Kc = poisoned(rt, "test.bfK", (B, H, cap_kv, D), out_bf16)
    Vc = poisoned(rt, "test.bfV", (B, H, cap_kv, D), out_bf16)
    pos_dev = rt.pool.upload("test.bfpos", np.array([pos], np.int32), np.int32) if on_device else None
    epi = Epilogue(bias=rt.pool.upload("test.bfbias", bias), qkv=(Kc, Vc, T, 0 if on_device else pos, H, D, cap_q,
                                                                  cap_kv), pos_dev=pos_dev)
    lin(A, W, Q, M, N, K, K, lin.ldb(K, N), N, epi)
    rt.synchronize(what)
    y = (a @ w + bias).reshape(B, T, 3, H, D).transpose(2, 0, 3, 1, 4)      # which, b, h, t, d
    tol = BF16_TOL if out_bf16 else FP32_TOL
    q, k, v = (result(X, out_bf16) for X in (Q, Kc, Vc))
    assert rel_err(q[:, :, :T], y[0]) <= tol
    assert rel_err(k[:, :, pos:pos + T], y[1]) <= tol
    assert rel_err(v[:, :, pos:pos + T], y[2]) <= tol
    assert np.isnan(q[:, :, T:]).all()
    for c in (k, v):
        assert np.isnan(c[:, :, :pos]).all() and np.isnan(c[:, :, pos + T:]).all()


# session 11's v8 epilogue options: residual groups loaded ahead, residual rows prefetched to L2, GELU on tanh.approx
S11 = {"BF_EPI_SMEM": 1, "BF_EPI_PRE": 1, "BF_RESID_PF": 1, "BF_GELU_FAST": 1}
S12PP = {**S11, "BF_EPI_PRE": 0, "BF_PP": 1}     # session 12's BF_PP (ping-pong consumers; no BF_EPI_PRE with it)
S14BM = {**S11, "BF_EPI_PRE": 0, "BF_BM": 256}   # session 14's 256-row tiles (no BF_EPI_PRE with them either)
S14FAST = {**S11, "BF_EPI_PRE": 0, "BF_EPI_FAST": 1}   # session 14's epilogue with per-chunk column work
# v8's maps by value (the driver launch), no wgmma group left in flight, tile widths; v9's deeper k tile
TUNED = [("bf16_wgmma", {"BF_TMA_PARAM": 1, "BF_INFLIGHT": 1}), ("bf16_wgmma", {"BF_TMA_PARAM": 1, "BF_INFLIGHT": 0}),
         ("bf16_wgmma", {"BF_TMA_PARAM": 0, "BF_INFLIGHT": 0}), ("bf16_wgmma", {"BF_TMA_PARAM": 1, "BF_BN": 128}),
         ("bf16_wgmma", {"BF_BN": 192}), ("bf16_mma", {"BF9_BK": 64, "BF9_STAGES": 3}),
         ("bf16_wgmma", {"BF_EPI_SMEM": 1}), ("bf16_wgmma", {"BF_EPI_SMEM": 1, "BF_BN": 256}),
         ("bf16_wgmma", {"BF_EPI_SMEM": 1, "BF_BN": 192, "BF_EPI_CH": 64, "BF_STAGES": 3}),
         ("bf16_wgmma", {"BF_EPI_WG": 1}), ("bf16_wgmma", {"BF_EPI_WG": 1, "BF_BN": 192, "BF_STAGES": 3}),
         ("bf16_wgmma", {"BF_CLUSTER": 2, "BF_EPI_SMEM": 1, "BF_BN": 192}),
         ("bf16_wgmma", {"BF_CLUSTER": 2, "BF_EPI_SMEM": 1, "BF_BN": 256}),
         ("bf16_wgmma", {"BF_CLUSTER": 4, "BF_EPI_SMEM": 1, "BF_BN": 256}),
         ("bf16_wgmma", {**S11, "BF_CLUSTER": 4, "BF_BN": 192}),
         ("bf16_wgmma", {**S12PP, "BF_BN": 192}), ("bf16_wgmma", {"BF_EPI_SMEM": 1, "BF_PP": 1, "BF_STAGES": 6}),
         ("bf16_wgmma", {**S14BM, "BF_BN": 192, "BF_STAGES": 3}), ("bf16_wgmma", {"BF_EPI_SMEM": 1, "BF_BM": 256}),
         ("bf16_wgmma", {**S14FAST, "BF_BN": 192}), ("bf16_wgmma", {**S14FAST, "BF_BN": 128, "BF_EPI_CH": 64}),
         ("bf16_wgmma", {**S11, "BF_BN": 192, "BF_EPI_CH": 64}), ("bf16_wgmma", {**S12PP, "BF_BN": 192, "BF_EPI_CH": 64})]


@pytest.mark.parametrize("version,defines", TUNED, ids=[f"{v}-{d}" for v, d in TUNED])
@pytest.mark.parametrize("M,N,K", [(1000, 770, 776), (129, 2304, 64), (300, 136, 200)])
def test_tunables(version, defines, M, N, K, rng):
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    rt, lin = linear(version, defines)
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias = rng.standard_normal(N).astype(np.float32)
    C = poisoned(rt, "test.bfC", (M, N), True)
    lin(A, W, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU))
    rt.synchronize("bf16 linear (tunables)")
    assert rel_err(result(C, True), ref.gelu(a @ w + bias)) <= BF16_TOL


@pytest.mark.parametrize("version", VERSIONS)
def test_a_offset_into_a_larger_buffer_and_repeated_calls(version, rng):
    """A taken from row 3 of a bigger buffer (the map/pointer moves), twice with different data: the cached
    TMA map must follow the address, and a second call must not reuse the first one's operands."""
    from convnet.gpu.runtime import ptr
    rt, lin = linear(version)
    M, N, K = 200, 136, 96
    w = rng.standard_normal((K, N)).astype(np.float32)
    W = rt.pool.upload("test.bfW", lin.layout(w), lin.w_dtype)
    for rep in range(2):
        a = rng.standard_normal((M + 3, K)).astype(np.float32)
        A = rt.pool.upload("test.bfA", to_bf16(a), BF16)
        C = poisoned(rt, "test.bfC", (M, N), False)
        lin(ptr(A, 3 * K), W, C, M, N, K, K, K, N)
        rt.synchronize("bf16 linear, A at an offset")
        want = round_bf16(a[3:]).astype(np.float64) @ round_bf16(w)
        assert rel_err(C.get(), want) <= FP32_TOL, f"call {rep}"


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("M,N,K", [(129, 2304, 768), (129, 768, 3072), (129, 50304, 768), (5, 768, 768)])
def test_bf16_per_shape_choice(out_bf16, M, N, K, rng):
    """Version "bf16" (v9 or v8 by shape, v10 for M <= 8) against float64, with bias and GELU."""
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    rt, lin = linear("bf16")
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias = rng.standard_normal(N).astype(np.float32)
    C = poisoned(rt, "test.bfC", (M, N), out_bf16)
    lin(A, W, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU))
    rt.synchronize("bf16 linear (per-shape choice)")
    assert rel_err(result(C, out_bf16), ref.gelu(a @ w + bias)) <= (BF16_TOL if out_bf16 else FP32_TOL)


# the epilogue's other builds: BF_EPI_CALLS=1 (GELU, the head-major scatter and unpaired stores as calls) and v8's
# BF_EPI_SMEM=1 (staged through shared memory, 8 columns per thread)
EPILOGUES = [("bf16_wgmma", {"BF_EPI_CALLS": 1, "BF_BN": 256}), ("bf16_mma", {"BF_EPI_CALLS": 1}),
             ("bf16_wgmma", {"BF_EPI_SMEM": 1, "BF_BN": 256}), ("bf16_wgmma", {"BF_EPI_SMEM": 1, "BF_EPI_CH": 64}),
             ("bf16_wgmma", {"BF_EPI_WG": 1}), ("bf16_wgmma", {"BF_EPI_WG": 1, "BF_BN": 192, "BF_STAGES": 3}),
             ("bf16_wgmma", {"BF_CLUSTER": 2, "BF_EPI_SMEM": 1, "BF_BN": 192}),
             ("bf16_wgmma", {**S11, "BF_BN": 192}), ("bf16_wgmma", {**S11, "BF_BN": 256, "BF_EPI_CH": 64, "BF_STAGES": 3}),
             ("bf16_wgmma", {**S11, "BF_CLUSTER": 4, "BF_BN": 256}),
             ("bf16_wgmma", {**S12PP, "BF_BN": 192}), ("bf16_wgmma", {**S12PP, "BF_EPI_CH": 64})]


@pytest.mark.parametrize("version,defines", EPILOGUES, ids=[f"{v}-{d}" for v, d in EPILOGUES])
@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
def test_epilogue_as_calls(version, defines, out_bf16, rng):
    """The epilogue's other builds: odd N with GELU, bias and a residual, a wide N with ldc % 8 == 0 (the vector
    stores), then the scatter with an odd head size and with head size 16."""
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    rt, lin = linear(version, defines)
    lin.bf_gemv = False
    for M, N, K in ((129, 77, 72), (200, 264, 136)):
        A, W, a, w = operands(rt, lin, rng, M, N, K)
        bias, r = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
        C = poisoned(rt, "test.bfC", (M, N), out_bf16)
        lin(A, W, C, M, N, K, K, K, N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU,
                                                resid=upload(rt, "test.bfR", r, out_bf16)))
        rt.synchronize("bf16 linear, epilogue build")
        tol = BF16_TOL if out_bf16 or defines.get("BF_GELU_FAST") else FP32_TOL    # tanh.approx: ~2^-11 relative
        assert rel_err(result(C, out_bf16), ref.gelu(a @ w + bias) + (round_bf16(r) if out_bf16 else r)) <= tol
    for B, T, H, D, pos in ((2, 9, 3, 7, 2), (3, 50, 2, 16, 5)):
        check_qkv_scatter(rt, lin, rng, out_bf16, B, T, H, D, pos, K, what="bf16 qkv scatter, epilogue build")


# v8 BF_EPI_WG=1 (the epilogue warpgroup) and BF_CLUSTER=2 (block pairs, W^T's tile multicast); the other tests run
# them at one tile per block at most
EPI_WG = [{"BF_EPI_WG": 1}, {"BF_EPI_WG": 1, "BF_BN": 192, "BF_STAGES": 3},
          {"BF_CLUSTER": 2, "BF_EPI_SMEM": 1, "BF_BN": 192}, {"BF_CLUSTER": 2, "BF_EPI_WG": 1},
          {"BF_CLUSTER": 4, "BF_EPI_SMEM": 1, "BF_BN": 192}, {**S11, "BF_CLUSTER": 4, "BF_BN": 256},
          {**S11, "BF_CLUSTER": 2, "BF_BN": 256},
          {**S12PP, "BF_BN": 192}, {**S12PP, "BF_BN": 192, "BF_STAGES": 5},
          {"BF_EPI_SMEM": 1, "BF_PP": 1, "BF_BN": 128, "BF_STAGES": 3},
          # the ping-pong consumers in clusters (W^T's tile multicast to a block pair, or A's and W^T's over 2 x 2)
          {**S12PP, "BF_BN": 192, "BF_CLUSTER": 2}, {"BF_EPI_SMEM": 1, "BF_PP": 1, "BF_BN": 128, "BF_CLUSTER": 4}]


@pytest.mark.parametrize("defines", EPI_WG, ids=[str(d) for d in EPI_WG])
@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
def test_epilogue_warpgroup_many_tiles_per_block(defines, out_bf16, rng):
    """More tiles than twice the resident blocks (each block, or block pair, walks several tiles: BF_EPI_WG's hand-off
    barriers, BF_CLUSTER's shared ring across tiles; 23 row tiles: the last pair's second block past M): bias + GELU
    + the residual in place (C is resid), odd M, N, K; then the head-major scatter over 2400 rows into a cache at
    position 7."""
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    rt, lin = linear("bf16_wgmma", defines)
    M, N, K = 2 * lin.wave_slots * 128 // 12 + 77, 12 * lin.tile[1] - 5, 200
    assert -(-M // 128) * -(-N // lin.tile[1]) > 2 * lin.wave_slots
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias, r = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    C = upload(rt, "test.bfC", r, out_bf16)
    lin(A, W, C, M, N, K, K, K, N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU, resid=C))
    rt.synchronize("bf16 linear, epilogue warpgroup")
    tol = BF16_TOL if out_bf16 or defines.get("BF_GELU_FAST") else FP32_TOL
    assert rel_err(result(C, out_bf16), ref.gelu(a @ w + bias) + (round_bf16(r) if out_bf16 else r)) <= tol
    check_qkv_scatter(rt, lin, rng, out_bf16, 8, 300, 12, 64, 7, 136, what="bf16 qkv scatter, epilogue warpgroup")


# v8 BF_PP=1 (session 12): each consumer warpgroup a whole tile, the two taking turns on the ring
PP = [{**S12PP, "BF_BN": 192}, {**S12PP, "BF_BN": 192, "BF_STAGES": 5}, {**S12PP, "BF_BN": 192, "BF_EPI_CH": 64},
      {"BF_EPI_SMEM": 1, "BF_PP": 1, "BF_BN": 128, "BF_STAGES": 6}, {"BF_EPI_SMEM": 1, "BF_PP": 1, "BF_BN": 128, "BF_STAGES": 2},
      {**S12PP, "BF_BN": 192, "BF_CLUSTER": 2, "BF_STAGES": 3}]


# v8 BF_BM=256 (session 14): 256-row tiles, 128 rows per consumer warpgroup
BM256 = [{**S14BM, "BF_BN": 192, "BF_STAGES": 3}, {**S14BM, "BF_BN": 128, "BF_STAGES": 4},
         {"BF_EPI_SMEM": 1, "BF_BM": 256, "BF_BN": 192, "BF_STAGES": 2}]
FAST = [{**S14FAST, "BF_BN": 192}, {**S14FAST, "BF_BN": 256, "BF_EPI_CH": 64, "BF_STAGES": 3}]


@pytest.mark.parametrize("defines", FAST, ids=[str(d) for d in FAST])
@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
def test_fast_epilogue_vector_paths(defines, out_bf16, rng):
    """BF_EPI_FAST=1 (session 14) on its 16-byte paths: N = 776 (8-column groups; the last tile part-filled), bias +
    GELU + the residual in place, then ReLU + a residual in another buffer, with 1000 rows (the last tile 24 rows
    past M) and a grid of 3 blocks (several tiles each, the bias loaded a chunk ahead across tiles); then the
    head-major scatter over sequences of 300 rows (a thread's rows cross a sequence inside a chunk)."""
    from convnet.gpu.gemm import ACT_GELU, ACT_RELU, Epilogue
    rt, lin = linear("bf16_wgmma", defines)
    lin.cluster_slots = 3
    M, N, K = 1000, 776, 200
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias, r = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    r_dev = round_bf16(r) if out_bf16 else r
    C = upload(rt, "test.bfC", r, out_bf16)
    lin(A, W, C, M, N, K, K, K, N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU, resid=C))
    rt.synchronize("bf16 linear, fast epilogue")
    assert rel_err(result(C, out_bf16), ref.gelu(a @ w + bias) + r_dev) <= BF16_TOL
    R = upload(rt, "test.bfR", r, out_bf16)
    C = poisoned(rt, "test.bfC2", (M, N), out_bf16)
    lin(A, W, C, M, N, K, K, K, N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_RELU, resid=R))
    rt.synchronize("bf16 linear, fast epilogue (relu)")
    tol = BF16_TOL if out_bf16 else FP32_TOL
    assert rel_err(result(C, out_bf16), np.maximum(a @ w + bias, 0) + r_dev) <= tol
    check_qkv_scatter(rt, lin, rng, out_bf16, 3, 300, 12, 64, 7, 136, what="bf16 qkv scatter, fast epilogue")


@pytest.mark.parametrize("defines", PP + BM256, ids=[str(d) for d in PP + BM256])
@pytest.mark.parametrize("blocks", [1, 3, 8])
def test_pingpong_many_tiles_on_few_blocks(defines, blocks, rng):
    """BF_PP (and BF_BM=256) with the persistent grid cut to 1, 3 or 8 blocks: each walks 5-40 tiles (BF_PP: its two
    warpgroups taking turns many times, the turn barriers' parity wraps; 13 k tiles a tile, not a multiple of the
    ring), odd M and N (BF_BM 256: the last row tile 24 rows past M), bias + GELU + a bf16
    residual; then fp32 out in place."""
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    rt, lin = linear("bf16_wgmma", defines)
    lin.cluster_slots = blocks
    M, N, K = 1000, 770, 776
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias, r = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    for out_bf16 in (True, False):
        C = upload(rt, "test.bfC", r, out_bf16)
        lin(A, W, C, M, N, K, K, K, N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU, resid=C))
        rt.synchronize("bf16 linear, ping-pong")
        want = ref.gelu(a @ w + bias) + (round_bf16(r) if out_bf16 else r)
        assert rel_err(result(C, out_bf16), want) <= BF16_TOL, f"out_bf16={out_bf16}"
    check_qkv_scatter(rt, lin, rng, True, 3, 300, 12, 64, 7, 136, what="bf16 qkv scatter, ping-pong")


# v8 BF_EPI_TMA=1 (session 15): C written by TMA stores, the residual by TMA reduce-adds into C itself
TMA = [{**S11, "BF_EPI_PRE": 0, "BF_EPI_TMA": 1, "BF_BN": 192}, {"BF_EPI_TMA": 1},
       {"BF_EPI_TMA": 1, "BF_BN": 256, "BF_STAGES": 3},
       # session 16: a whole tile staged per warpgroup (bf16 out; the fp32 build keeps 2 buffers at 4 stages, 3 at 3)
       {**S11, "BF_EPI_PRE": 0, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 3},
       {**S11, "BF_EPI_PRE": 0, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 3, "BF_STAGES": 3},
       # session 18: with BF_PP (a warpgroup's whole tile as two 64-row halves: chunk buffers rotating across halves
       # and tiles at 2, each half staged whole at 3 or at BF_BN 128)
       {**S12PP, "BF_EPI_TMA": 1, "BF_BN": 192}, {**S12PP, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 3, "BF_STAGES": 3},
       {"BF_EPI_TMA": 1, "BF_PP": 1},
       # session 20: fast_bf16's projections (BF_PP without BF_RESID_PF: the tile walk worked out per tile)
       {**S12PP, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 4, "BF_RESID_PF": 0},
       # the same and mlp_fc's in clusters: block pairs sharing W^T's tile, and 2 x 2 sharing A's too
       {**S12PP, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 4, "BF_RESID_PF": 0, "BF_CLUSTER": 2},
       {**S12PP, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 3, "BF_CLUSTER": 2},
       {**S12PP, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 3, "BF_CLUSTER": 4}]


@pytest.mark.parametrize("defines", TMA, ids=[str(d) for d in TMA])
@pytest.mark.parametrize("blocks", [3, 132])
def test_tma_epilogue_stores_and_in_place_residual(defines, blocks, rng):
    """BF_EPI_TMA: 1000 x 776 (the last row tile 24 rows past M, the last column tile part-filled: the TMA unit clips
    both), 3 blocks (many tiles each: the staging buffers alternate across tiles) or a full grid. fp32 C +=
    GELU(A W + b) in place, and bf16 C += the same (session 22); bf16 and fp32 stores of ReLU(A W + b) into NaN-poisoned buffers wider than N (ldc 784:
    the columns past N stay NaN); a residual that is not C refused. The head-major scatter by TMA stores (bf16, T = 128
    and 192: a 128-row tile spans two sequences, pos 7 into a longer cache) and on the no_tma_twin (T = 300, pos from
    the device, fp32), everything else poisoned."""
    from convnet.errors import GPUError
    from convnet.gpu.gemm import ACT_GELU, ACT_RELU, Epilogue
    rt, lin = linear("bf16_wgmma", defines)
    lin.cluster_slots = blocks
    M, N, K, ldc = 1000, 776, 200, 784
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias, r = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    B = rt.pool.upload("test.bfbias", bias)
    X = rt.pool.upload("test.bfX", r)
    lin(A, W, X, M, N, K, K, K, N, Epilogue(bias=B, act=ACT_GELU, resid=X))
    rt.synchronize("bf16 linear, TMA reduce-add")
    tol = BF16_TOL if defines.get("BF_GELU_FAST") else FP32_TOL
    assert rel_err(X.get(), ref.gelu(a @ w + bias) + r) <= tol
    # a bf16 residual in place (session 22): the bf16 tile reduce-added into bf16 C, rounded once
    X16 = upload(rt, "test.bfX16", r, True)
    lin(A, W, X16, M, N, K, K, K, N, Epilogue(bias=B, act=ACT_GELU, resid=X16))
    rt.synchronize("bf16 linear, TMA reduce-add into bf16")
    assert rel_err(result(X16, True), ref.gelu(a @ w + bias) + round_bf16(r)) <= BF16_TOL
    for out_bf16 in (True, False):
        C = poisoned(rt, "test.bfC", (M, ldc), out_bf16)
        lin(A, W, C, M, N, K, K, K, ldc, Epilogue(bias=B, act=ACT_RELU))
        rt.synchronize("bf16 linear, TMA store")
        got = result(C, out_bf16)
        assert np.isnan(got[:, N:]).all(), "the GEMM wrote past column N"
        assert rel_err(got[:, :N], np.maximum(a @ w + bias, 0)) <= (BF16_TOL if out_bf16 else FP32_TOL), out_bf16
    with pytest.raises(GPUError, match="in place only"):
        lin(A, W, X, M, N, K, K, K, N, Epilogue(bias=B, resid=rt.pool.upload("test.bfR", r)))
    for out_bf16, B, T, on_device in ((True, 2, 128, False), (True, 3, 192, False), (True, 3, 300, False),
                                      (True, 2, 128, True), (False, 2, 128, False)):
        check_qkv_scatter(rt, lin, rng, out_bf16, B, T, 12, 64, 7, 136, on_device=on_device)


# v8 BF_LNS (session 21, the LayerNorm fold): the residual side (BF_LNS=1) on ping-pong at BF_BN 128 and cooperative at
# 192 (3 stages), as trials t21a / t21b run them; the GEMM after the LayerNorm (BF_LNS=2) on ping-pong at 192 with the
# statistics in tiles of 192 or 128
S21 = {**S12PP, "BF_GELU_FAST": 0, "BF_RESID_PF": 0, "BF_EPI_TMA": 1}
LNS_OUT = [{**S21, "BF_BN": 128, "BF_EPI_TMA_BUFS": 4, "BF_LNS": 1},
           {**S21, "BF_PP": 0, "BF_BN": 192, "BF_STAGES": 3, "BF_EPI_TMA_BUFS": 4, "BF_LNS": 1}]
LNS_IN = [{**S21, "BF_BN": 192, "BF_EPI_TMA_BUFS": 3, "BF_LNS": 2},
          {**S21, "BF_BN": 192, "BF_EPI_TMA_BUFS": 4, "BF_LNS": 2, "BF_LNS_PART": 128}]


@pytest.mark.parametrize("defines", LNS_OUT, ids=[str(d) for d in LNS_OUT])
@pytest.mark.parametrize("blocks", [3, 132])
def test_ln_fold_residual_side(defines, blocks, rng):
    """BF_LNS=1 at M x N = 1000 x 776 (the last row tile 24 rows past M, the last column tile part-filled): x = resid + A W
    + b in place, xg = bf16(x gamma) and each column tile's row (mean, M2) into NaN-poisoned buffers, against float64;
    the same build without statistics is the plain reduce-add; a bf16 C or a missing xg refused."""
    from convnet.errors import GPUError
    from convnet.gpt2.ln_fold import tile_stats
    from convnet.gpu.gemm import Epilogue
    rt, lin = linear("bf16_wgmma", defines)
    lin.cluster_slots = blocks
    M, N, K = 1000, 776, 200
    A, W, a, w = operands(rt, lin, rng, M, N, K)
    bias, r = rng.standard_normal(N).astype(np.float32), (3 + rng.standard_normal((M, N))).astype(np.float32)
    gamma = (1 + 0.5 * rng.standard_normal(N)).astype(np.float32)
    B, G = rt.pool.upload("test.bfbias", bias), rt.pool.upload("test.lnsG", gamma)
    X = rt.pool.upload("test.bfX", r)
    XG = poisoned(rt, "test.lnsXG", (M, N), True)
    S = rt.pool.get("test.lnsS", lin.lns_shape(M, N))
    S.fill(np.float32("nan"))
    lin(A, W, X, M, N, K, K, K, N, Epilogue(bias=B, resid=X, lns=(G, S, XG, 1e-5)))
    rt.synchronize("bf16 linear, LayerNorm fold residual side")
    x = a @ w + bias + r
    assert rel_err(X.get(), x) <= FP32_TOL
    assert rel_err(from_bf16(XG.get()), x * gamma) <= BF16_TOL
    want = tile_stats(x, lin.tile[1])
    got = S.get()
    assert rel_err(got[:, :, 0], want[:, :, 0]) <= FP32_TOL and rel_err(got[:, :, 1], want[:, :, 1]) <= FP32_TOL
    X.set(r)
    lin(A, W, X, M, N, K, K, K, N, Epilogue(bias=B, resid=X))
    rt.synchronize("bf16 linear, BF_LNS=1 build without statistics")
    assert rel_err(X.get(), x) <= FP32_TOL
    with pytest.raises(GPUError, match="BF_LNS=1"):
        lin(A, W, X, M, N, K, K, K, N, Epilogue(bias=B, resid=X, lns=(G, S, None, 1e-5)))


@pytest.mark.parametrize("defines", LNS_IN, ids=[str(d) for d in LNS_IN])
@pytest.mark.parametrize("out_bf16,act", [(False, 0), (True, 2)], ids=["fp32_out", "bf16_gelu"])
@pytest.mark.parametrize("blocks", [3, 132])
def test_ln_fold_layernorm_side(defines, out_bf16, act, blocks, rng):
    """BF_LNS=2 at M x N x K = 1000 x 776 x 776 (K not a whole number of statistics tiles): A = bf16(x gamma) with x's
    rows off zero (mean 3: the fold's cancellation), the statistics as the residual side writes them, s and b' from
    fold_vectors; against the fold's float64 oracle of the same inputs (tight) and LayerNorm(x) W + b (bf16 bound);
    without statistics the build is the plain product."""
    from convnet.gpt2.ln_fold import fold_vectors, folded_linear, tile_stats
    from convnet.gpu.gemm import Epilogue
    rt, lin = linear("bf16_wgmma", defines)
    lin.cluster_slots = blocks
    M, N, K, part, eps = 1000, 776, 776, lin.lns_part, 1e-5
    x = (3 + rng.standard_normal((M, K))).astype(np.float32)
    gamma, beta = (1 + 0.5 * rng.standard_normal(K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
    w32, bias = rng.standard_normal((K, N)).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    w = round_bf16(w32).astype(np.float64)
    s, bp = fold_vectors(gamma, beta, w, bias)
    xg = round_bf16(x * gamma)
    stats = tile_stats(x, part).astype(np.float32)
    A = rt.pool.upload("test.bfA", to_bf16(xg), BF16)
    W = rt.pool.upload("test.bfW", lin.layout(w32), lin.w_dtype)
    S, SV, BP = rt.pool.upload("test.lnsS", stats), rt.pool.upload("test.lnsSV", s), rt.pool.upload("test.lnsBP", bp)
    C = poisoned(rt, "test.bfC", (M, N), out_bf16)
    lin(A, W, C, M, N, K, K, K, N, Epilogue(bias=BP, act=act, lns=(SV, S, None, eps)))
    rt.synchronize("bf16 linear, LayerNorm fold")
    f = ref.gelu if act else (lambda v: v)
    oracle = f(folded_linear(xg, stats.astype(np.float64), s, bp, w, part, eps))
    tol = BF16_TOL if out_bf16 else FP32_TOL
    assert rel_err(result(C, out_bf16), oracle) <= tol
    mean, var = x.astype(np.float64).mean(1, keepdims=True), x.astype(np.float64).var(1, keepdims=True)
    exact = f(((x - mean) / np.sqrt(var + eps) * gamma + beta) @ w + bias)
    assert rel_err(result(C, out_bf16), exact) <= 2e-2
    C = poisoned(rt, "test.bfC", (M, N), out_bf16)
    lin(A, W, C, M, N, K, K, K, N, Epilogue(bias=BP, act=act))
    rt.synchronize("bf16 linear, BF_LNS=2 build without statistics")
    assert rel_err(result(C, out_bf16), f(xg @ w + bp)) <= tol


# v8 BF_PDL=1 (session 17): programmatic dependent launches; fast_bf16's prefill builds (TMA epilogue, BF_PP) and
# the defaults with a ring deeper than the k loop (W^T's boxes of every stage requested before the wait)
PDL = [{**S11, "BF_EPI_PRE": 0, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 3, "BF_PDL": 1},
       {**S12PP, "BF_BN": 192, "BF_EPI_CH": 64, "BF_PDL": 1}, {"BF_PDL": 1}, {**S11, "BF_BN": 192, "BF_PDL": 1}]


@pytest.mark.parametrize("defines", PDL, ids=[str(d) for d in PDL])
def test_pdl_chain_reads_what_the_kernel_before_wrote(defines, rng):
    """Three BF_PDL GEMMs in a row on one stream, each reading the one before's output (NaN-poisoned beforehand) and
    the first behind a slow GEMM: a block that read A, or wrote C, before griddepcontrol.wait would show as NaN or a
    wrong sum. H = A W0 (K 3072), H2 = H W1 (bf16 outs), X += H2 W2 + b in place (fp32, K 136: 3 k tiles, fewer than
    the ring's stages), X written by a fill just before; then the same chain captured in a CUDA graph."""
    from convnet.gpu.gemm import Epilogue
    from convnet.gpu.graph import Graph
    rt, lin = linear("bf16_wgmma", defines)
    M, K0, N0, N1, N2 = 1000, 3072, 776, 136, 200
    a = rng.standard_normal((M, K0)).astype(np.float32)
    ws = [rng.standard_normal(shape).astype(np.float32) / np.sqrt(shape[0]) for shape in ((K0, N0), (N0, N1), (N1, N2))]
    bias, r = rng.standard_normal(N2).astype(np.float32), rng.standard_normal((M, N2)).astype(np.float32)
    A = rt.pool.upload("test.pdlA", to_bf16(a), BF16)
    W = [rt.pool.upload(f"test.pdlW{i}", lin.layout(w), lin.w_dtype) for i, w in enumerate(ws)]
    B = rt.pool.upload("test.pdlbias", bias)
    h = round_bf16(round_bf16(a).astype(np.float64) @ round_bf16(ws[0]))
    h2 = round_bf16(h @ round_bf16(ws[1]))
    want = h2 @ round_bf16(ws[2]).astype(np.float64) + bias + r
    s = rt.stream()

    def chain(H, H2, X):
        lin(A, W[0], H, M, N0, K0, K0, K0, N0, Epilogue(), s)
        lin(H, W[1], H2, M, N1, N0, N0, N0, N1, Epilogue(), s)
        lin(H2, W[2], X, M, N2, N1, N1, N1, N2, Epilogue(bias=B, resid=X), s)

    for graph in (False, True):
        H, H2 = poisoned(rt, "test.pdlH", (M, N0), True), poisoned(rt, "test.pdlH2", (M, N1), True)
        X = rt.pool.upload("test.pdlX", r)
        rt.synchronize("poisoned buffers")
        if graph:
            chain(H, H2, X)                            # the maps' uploads happen outside the capture
            rt.synchronize("bf16 PDL chain, before the capture")
            H.fill(BF16(BF16_NAN))
            H2.fill(BF16(BF16_NAN))
            X.set(r)
            rt.synchronize("poisoned buffers")
            with Graph.capture(s) as g:
                chain(H, H2, X)
            g.launch()
        else:
            chain(H, H2, X)
        s.synchronize()
        assert rel_err(from_bf16(H.get()), h) <= BF16_TOL, f"H, graph={graph}"
        assert rel_err(X.get(), want) <= BF16_TOL, f"X, graph={graph}"


def _layernorm64(x, g, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


# v10 as the bf16 variants build it (fast_bf16_mma: plain; fast_bf16: PDL_EARLY=1, bias, gamma / beta and pos read
# before griddepcontrol.wait), and as fast_bf16's groups do (the LM head: BFS_CG 8, the N = 768 projections: 1)
GEMV_BUILDS = [("bf16_mma", "fast_bf16_mma", {})] + \
    [("bf16_wgmma", "fast_bf16", e) for e in ({}, {"BF_BN": 256, "BFS_CG": 8}, {"BFS_CG": 1})]
GEMV_IDS = [f"{v}-{n}-{e}" for v, n, e in GEMV_BUILDS]


def gemv_linear(version, variant, extra):
    """linear(version) with the variant's constants and extra on top (the builds the variant's groups use), every
    M <= 8 on the GEMV (fast_bf16 runs 2-8 rows of its layers on v13 or v14; one row stays on v10)."""
    from convnet import catalogue
    return linear(version, {**catalogue.get(variant, "gpt2").defines, "BFM_SLAB_MIN_M": 9, "BFM_GEMV_MMA": 0, **extra})


@pytest.mark.parametrize("version,variant,extra", GEMV_BUILDS, ids=GEMV_IDS)
@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
def test_gemv_early_reads(version, variant, extra, out_bf16, rng):
    """v10 at M = 1, 3, 8 (odd N: a partial column group) with bias + GELU + residual, then the QKV scatter with pos
    from the device (the reads PDL_EARLY moves before the wait)."""
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    rt, lin = gemv_linear(version, variant, extra)
    for M, N, K in ((1, 2304, 768), (3, 77, 776), (8, 3072, 768), (1, 770, 3072)):
        A, W, a, w = operands(rt, lin, rng, M, N, K)
        bias, r = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
        C = poisoned(rt, "test.bfC", (M, N), out_bf16)
        lin(A, W, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU,
                                                              resid=upload(rt, "test.bfR", r, out_bf16)))
        rt.synchronize("bf16 GEMV")
        want = ref.gelu(a @ w + bias) + (round_bf16(r) if out_bf16 else r)
        assert rel_err(result(C, out_bf16), want) <= (BF16_TOL if out_bf16 else FP32_TOL), (M, N, K)
    for B, pos in ((1, 9), (3, 0)):
        check_qkv_scatter(rt, lin, rng, out_bf16, B, 1, 12, 64, pos, 768, on_device=True, what="bf16 GEMV qkv")


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("version,variant,extra", GEMV_BUILDS, ids=GEMV_IDS)
@pytest.mark.parametrize("M,N,K,pad", [(1, 2304, 768, 0), (3, 770, 776, 4), (8, 72, 1024, 0), (1, 50304, 768, 0),
                                       (5, 8, 8, 4), (2, 3072, 768, 8)])
def test_gemv_layernorm_prologue(version, variant, extra, out_bf16, M, N, K, pad, rng):
    """v10's _ln builds (decoding's ln_1, ln_2, ln_f inside the GEMV): C = GELU(LayerNorm(X) @ W + b) + resid with X
    the fp32 rows (row stride K + pad). Against layernorm_warp_bf16 then the plain GEMV (the unfused path: the same
    bf16 operand, so the same result to fp32 rounding) and against float64 of the bf16-rounded LayerNorm."""
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    from convnet.gpu.runtime import cdiv, f32, i32, ptr
    rt, lin = gemv_linear(version, variant, extra)
    eps = 1e-5
    x = (rng.standard_normal((M, K)) * 2 + 0.5).astype(np.float32)
    g = (1 + 0.2 * rng.standard_normal(K)).astype(np.float32)
    be = (0.1 * rng.standard_normal(K)).astype(np.float32)
    X = rt.pool.upload("test.bfXp", np.pad(x, ((0, 0), (0, pad))))
    pair = rt.pool.upload("test.bfln", np.concatenate([g, be]))
    w = rng.standard_normal((K, N)).astype(np.float32)
    W = rt.pool.upload("test.bfW", lin.layout(w), lin.w_dtype)
    bias = rng.standard_normal(N).astype(np.float32)
    r = rng.standard_normal((M, N)).astype(np.float32)
    epi = Epilogue(bias=rt.pool.upload("test.bfbias", bias), act=ACT_GELU, resid=upload(rt, "test.bfR", r, out_bf16))
    assert lin.fuses_layernorm(M, N, K)
    C = poisoned(rt, "test.bfC", (M, N), out_bf16)
    lin(X, W, C, M, N, K, K + pad, lin.ldb(K, N), N, epi, ln=(pair, ptr(pair, K), eps))
    from convnet.gpt2.gpu import ln_entry
    ln = rt.kernel("transformer.cu", ln_entry("layernorm_warp_bf16", K), {"LN_CONST": 0}, "test")
    A = rt.pool.get("test.bfA", (M, K), BF16)
    ln((cdiv(M, 8), 1, 1), (256, 1, 1), rt.pool.upload("test.bfX", x), pair, ptr(pair, K), A, i32(M), i32(K), f32(eps))
    C2 = poisoned(rt, "test.bfC2", (M, N), out_bf16)
    lin(A, W, C2, M, N, K, K, lin.ldb(K, N), N, epi)
    rt.synchronize("bf16 GEMV with the LayerNorm prologue")
    got = result(C, out_bf16)
    same = rel_err(got, result(C2, out_bf16))
    print(f"fused vs LayerNorm kernel + GEMV: rel err {same:.2e}")
    assert same <= 1e-5
    a = round_bf16(_layernorm64(x, g, be, eps).astype(np.float32)).astype(np.float64)
    want = ref.gelu(a @ round_bf16(w) + bias) + (round_bf16(r) if out_bf16 else r)
    assert rel_err(got, want) <= (BF16_TOL if out_bf16 else 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("version,variant,extra", GEMV_BUILDS, ids=GEMV_IDS)
@pytest.mark.parametrize("N,K,pad,offset", [(2304, 768, 0, 0.0), (770, 776, 4, 300.0), (72, 1600, 0, 0.0),
                                            (6403, 1600, 0, -1000.0), (8, 8, 4, 0.0), (50304, 768, 0, 0.0),
                                            (1003, 2056, 0, 50.0)])
def test_gemv_layernorm_fold(version, variant, extra, out_bf16, N, K, pad, offset, rng):
    """v10's _lnf1 builds (decode_fold, one row): C = GELU(rstd (x gamma W - mean s) + b') + resid with s and b' from
    ln_fold.fold_vectors, equal to GELU(LayerNorm(X) @ W + b) + resid in float64 with the LayerNorm not rounded:
    K past the prologue's 1024, rows far from zero (offset: the sums are shifted by each row's first value), odd N,
    grids of one wave (_lnf1) and of several (_lnf1_dense). Two rows are refused in one line."""
    M = 1
    from convnet.gpt2.ln_fold import fold_vectors
    from convnet.gpu.gemm import ACT_GELU, Epilogue, FoldedLN
    rt, lin = gemv_linear(version, variant, extra)
    eps = 1e-5
    x = (rng.standard_normal((M, K)) * 2 + offset).astype(np.float32)
    g = (1 + 0.2 * rng.standard_normal(K)).astype(np.float32)
    be = (0.1 * rng.standard_normal(K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    s_vec, b_vec = fold_vectors(g, be, round_bf16(w), bias)
    X = rt.pool.upload("test.bfXp", np.pad(x, ((0, 0), (0, pad))))
    W = rt.pool.upload("test.bfW", lin.layout(w), lin.w_dtype)
    r = rng.standard_normal((M, N)).astype(np.float32)
    epi = Epilogue(bias=rt.pool.upload("test.bfb", b_vec), act=ACT_GELU, resid=upload(rt, "test.bfR", r, out_bf16))
    assert lin.fuses_layernorm(M, N, K, fold=True)
    C = poisoned(rt, "test.bfC", (M, N), out_bf16)
    lin(X, W, C, M, N, K, K + pad, lin.ldb(K, N), N, epi,
        ln=FoldedLN(rt.pool.upload("test.bfg", g), rt.pool.upload("test.bfs", s_vec), eps))
    rt.synchronize("bf16 GEMV with the LayerNorm folded")
    want = ref.gelu(_layernorm64(x, g, be, eps) @ round_bf16(w) + bias) + (round_bf16(r) if out_bf16 else r)
    err = rel_err(result(C, out_bf16), want)
    print(f"folded LayerNorm GEMV vs float64: rel err {err:.2e}")
    assert err <= (BF16_TOL if out_bf16 else FP32_TOL)
    from convnet.errors import GPUError
    with pytest.raises(GPUError, match="LayerNorm"):
        lin(X, W, C, 2, N, K, K + pad, lin.ldb(K, N), N, epi, ln=FoldedLN(None, None, eps))
