"""The bf16 GEMMs' host side, without a GPU: bf16 rounding (convnet/gpu/bf16.py), Linear's bf16 versions on the
dry-run runtime (builds, grids, weight layout, one-line refusals before any launch), and their kernels compiling
for sm_90a without spills (where nvcc is installed)."""
import itertools

import numpy as np
import pytest

from convnet.bench.dryrun import RecordingRuntime
from convnet.errors import GPUError
from convnet.gpu import build
from convnet.gpu.bf16 import BF16, BF16_NAN, from_bf16, round_bf16, to_bf16
from convnet.gpu.gemm import ACT_GELU, Epilogue, Linear


def nearest_even_bf16(x: float) -> float:
    """x rounded to bf16 (8 significant bits) by float64 arithmetic: nearest, ties to the even significand."""
    if not np.isfinite(x) or x == 0:
        return x
    e = np.floor(np.log2(abs(x)))
    e = max(e, -126)                                    # subnormals: a fixed quantum
    q = 2.0 ** (e - 7)
    y = x / q
    r = np.round(y)                                     # numpy rounds halves to even
    out = r * q
    return out if abs(out) < 2.0 ** 128 * (1 - 2 ** -9) else np.copysign(np.inf, x)


def test_to_bf16_rounds_to_nearest_even(rng):
    x = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, 2000),
                        [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 1 + 2 ** -8 + 2 ** -20, 3.3e38, 3.4e38, 1e-40,
                         -1e-39, 2 ** -133]]).astype(np.float32)
    want = np.array([nearest_even_bf16(float(v)) for v in x])
    got = from_bf16(to_bf16(x)).astype(np.float64)
    assert np.array_equal(got, want), x[got != want][:5]
    assert to_bf16(np.float32(1 + 2 ** -8)) == 0x3F80 and to_bf16(np.float32(1 + 3 * 2 ** -8)) == 0x3F82


def test_bf16_special_values_and_round_trip(rng):
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    u = to_bf16(specials)
    assert list(u[:4]) == [0x0000, 0x8000, 0x7F80, 0xFF80]
    assert np.isnan(from_bf16(u[4])) and np.isnan(from_bf16(np.uint16(BF16_NAN)))
    bits = rng.integers(0, 1 << 16, 5000).astype(np.uint16)
    finite = bits[np.isfinite(from_bf16(bits))]
    assert np.array_equal(to_bf16(from_bf16(finite)), finite)          # bf16 values are fixed points
    x = rng.standard_normal(1000).astype(np.float32)
    assert np.abs(round_bf16(x) - x).max() <= np.abs(x).max() * 2 ** -9
    assert to_bf16(x.reshape(10, 100)).shape == (10, 100) and to_bf16(x).dtype == BF16


def dry(version, defines=None, arch="sm_90a"):
    rt = RecordingRuntime()
    rt.arch = arch
    return rt, Linear(rt, version, defines or {}, "t")


@pytest.mark.parametrize("version,kernel", [("bf16_wgmma", "gemm_bf16_wgmma"), ("bf16_mma", "gemm_bf16_mma")])
def test_builds_both_output_types(version, kernel):
    rt, lin = dry(version, {"BF_BN": 192})
    assert {dict(d)["BF_OUT"] for _, d in rt.builds} == {0, 1}
    # BF_BN reaches the builds whose text names it (v8's; the other families' builds leave it out)
    assert all(dict(d).get("BF_BN", 192) == 192 for _, d in rt.builds)
    v8_with_bn = any("KERNELS_BF16_WGMMA" in dict(d) and "BF_BN" in dict(d) for _, d in rt.builds)
    assert v8_with_bn == (version == "bf16_wgmma")
    assert set(lin.bf_kernels) == {True, False} and all(k.name == kernel for k in lin.bf_kernels.values())
    assert lin.w_layout == "nk" and lin.w_dtype == BF16 and lin.ldb(768, 2304) == 768
    # the LayerNorm prologue: v10's _ln builds (M <= 8, K a multiple of 8 up to 128 * BFS_LN_VEC), not the tiles
    assert lin.fuses_layernorm(1, 768, 768) and lin.fuses_layernorm(8, 2304, 1024)
    assert not lin.fuses_layernorm(9, 768, 768) and not lin.fuses_layernorm(1, 768, 1032)
    assert not lin.fuses_layernorm(1, 768, 772)
    # folded (v10's _lnf1 builds): one row, any K a multiple of 8
    assert lin.fuses_layernorm(1, 768, 1600, fold=True) and lin.fuses_layernorm(1, 6400, 6400, fold=True)
    assert not lin.fuses_layernorm(2, 768, 768, fold=True) and not lin.fuses_layernorm(1, 768, 1604, fold=True)
    assert {k.name for pair in lin.bf_skinny_lnf.values() for k in pair} == {"gemm_skinny_bf16_lnf1",
                                                                             "gemm_skinny_bf16_lnf1_dense"}
    lin.bf_gemv = False
    assert not lin.fuses_layernorm(1, 768, 768) and not lin.fuses_layernorm(1, 768, 768, fold=True)


@pytest.mark.parametrize("M,gamma,why", [(2, 0, "at one row"), (1, 8, "16-byte aligned")])
def test_folded_layernorm_refusals_are_one_line(M, gamma, why):
    """A FoldedLN the _lnf1 builds cannot take (two rows; gamma not 16-byte aligned, which they read as float4) is
    one line naming it, before any launch."""
    from convnet.errors import GPUError
    from convnet.gpu.gemm import FoldedLN
    rt, lin = dry("bf16_wgmma")
    with pytest.raises(GPUError, match=f"the folded LayerNorm .* {why}") as e:
        lin(0, 0, 0, M, 768, 768, 768, 768, 768, ln=FoldedLN(gamma, 0, 1e-5), out_bf16=False)
    assert "\n" not in str(e.value) and not rt.launches


def test_layout_is_bf16_w_transposed(rng):
    _, lin = dry("bf16_wgmma")
    w = rng.standard_normal((72, 40)).astype(np.float32)
    got = lin.layout(w)
    assert got.dtype == BF16 and got.shape == (40, 72) and got.flags.c_contiguous
    assert np.array_equal(got, to_bf16(w.T))


@pytest.mark.parametrize("M,N,K", [(8192, 2304, 768), (8192, 768, 3072), (1, 8, 8), (129, 770, 776)])
def test_grids(M, N, K):
    rt, lin = dry("bf16_wgmma")
    lin.bf_gemv = False                                  # M = 1 too on the tile kernel
    A, W = rt.pool.get("a", (M, K), BF16), rt.pool.get("w", (N, K), BF16)
    for C in (rt.pool.get("c", (M, N), BF16), rt.pool.get("c32", (M, N), np.float32)):
        lin(A, W, C, M, N, K, K, K, N, Epilogue(act=ACT_GELU))
    tiles = -(-M // 128) * -(-N // 128)
    # persistent: one block per tile up to the resident blocks (the dry run says 2 per SM, 132 SMs)
    assert [(g, b) for _, g, b, _ in rt.launches] == [((min(tiles, 264), 1, 1), (384, 1, 1))] * 2
    # the tensor maps' address, M, N, K, Linear's 14 epilogue arguments and the 3 of the LayerNorm fold (BF_LNS)
    assert rt.launches[0][3] == 1 + 3 + 14 + 3
    rtp, linp = dry("bf16_wgmma", {"BF_TMA_PARAM": 1})          # maps by value: two 128-byte arguments
    linp.bf_gemv = False
    linp(A, W, rtp.pool.get("c", (M, N), BF16), M, N, K, K, K, N)
    assert rtp.launches[0][3] == 2 + 3 + 14 + 3
    rt9, lin9 = dry("bf16_mma")
    lin9.bf_gemv = False
    lin9(A, W, rt9.pool.get("c", (M, N), BF16), M, N, K, K, K, N)
    assert rt9.launches == [("gemm_bf16_mma", (-(-M // 128) * -(-N // 128), 1, 1), (256, 1, 1), 7 + 14)]


@pytest.mark.parametrize("version", ["bf16_wgmma", "bf16_mma"])
def test_decoding_rows_take_the_gemv(version):
    """M <= 8: v10 (8 columns per block of 256 threads; a one-row build for M = 1); M = 9: the tile kernel."""
    rt, lin = dry(version)
    for M in (1, 8, 9):
        A, W, C = rt.pool.get("a", (M, 768), BF16), rt.pool.get("w", (2304, 768), BF16), rt.pool.get("c", (M, 2304))
        lin(A, W, C, M, 2304, 768, 768, 768, 2304)
    names = [n for n, *_ in rt.launches]
    assert names == ["gemm_skinny_bf16_1", "gemm_skinny_bf16", f"gemm_{version}"]
    assert [g for _, g, _, _ in rt.launches[:2]] == [(288, 1, 1)] * 2


@pytest.mark.parametrize("version", ["bf16_wgmma", "bf16_mma"])
@pytest.mark.parametrize("M,N,K,lda,ldb,why", [(64, 64, 12, 12, 12, "multiples of 8"), (64, 64, 16, 20, 16, "lda"),
                                               (64, 64, 16, 16, 12, "ldb"), (0, 64, 16, 16, 16, "M, N >= 1")])
def test_bad_shapes_refused_before_any_launch(version, M, N, K, lda, ldb, why):
    rt, lin = dry(version)
    A, W, C = rt.pool.get("a", (max(M, 1), lda), BF16), rt.pool.get("w", (N, ldb), BF16), rt.pool.get("c", (1, N))
    with pytest.raises(GPUError, match="multiples of 8"):
        lin(A, W, C, M, N, K, lda, ldb, N)
    assert rt.launches == []


def test_other_refusals():
    rt, lin = dry("bf16_mma")
    A, W = rt.pool.get("a", (8, 8), BF16), rt.pool.get("w", (8, 8), BF16)
    with pytest.raises(GPUError, match="bf16 .uint16. or float32"):
        lin(A, W, rt.pool.get("c", (8, 8), np.float16), 8, 8, 8, 8, 8, 8)
    with pytest.raises(GPUError, match="LayerNorm"):                 # the prologue is the GEMV's (M <= 8)
        lin(rt.pool.get("x", (9, 8)), W, rt.pool.get("c", (9, 8), BF16), 9, 8, 8, 8, 8, 8, ln=(None, None, 1e-5))
    with pytest.raises(GPUError, match="multiple of 4"):              # fp32 rows to normalise: 16-byte rows
        lin(rt.pool.get("x", (2, 10)), W, rt.pool.get("c", (2, 8), BF16), 2, 8, 8, 10 - 4, 8, 8, ln=(None, None, 1e-5))
    assert rt.launches == []
    lin(rt.pool.get("x", (1, 8)), W, rt.pool.get("c", (1, 8), BF16), 1, 8, 8, 8, 8, 8, ln=(None, None, 1e-5))
    assert [k for k, *_ in rt.launches] == ["gemm_skinny_bf16_ln1"]
    rt.launches.clear()
    with pytest.raises(GPUError, match="needs a Hopper GPU"):
        dry("bf16_wgmma", arch="sm_80")
    with pytest.raises(GPUError, match="8.0 or newer"):
        dry("bf16_mma", arch="sm_75")
    dry("bf16_mma", arch="sm_86")                      # Ampere runs v9


# (a bf16 variant's own builds are compiled by test_kernels_compile too)
BUILDS = {"defaults-bf16-out": {"BF_OUT": 1},
          "tunables-fp32-out": {"BF_OUT": 0, "BF_BN": 256, "BF_GROUP": 0, "BF_TMA_PARAM": 1, "BF_INFLIGHT": 0,
                                "BF_EPI_CALLS": 1, "BF9_BK": 64, "BF9_STAGES": 3, "BFS_CG": 4},
          "epilogue-in-shared-memory": {"BF_OUT": 0, "BF_BN": 256, "BF_EPI_SMEM": 1, "PDL": 1},
          "epilogue-warpgroup-192": {"BF_OUT": 1, "BF_BN": 192, "BF_STAGES": 3, "BF_EPI_WG": 1, "PDL": 1},
          "epilogue-warpgroup-128": {"BF_OUT": 0, "BF_EPI_WG": 1},
          "cluster-pairs": {"BF_OUT": 1, "BF_BN": 192, "BF_EPI_SMEM": 1, "BF_CLUSTER": 2, "PDL": 1},
          "pingpong-192": {"BF_OUT": 0, "BF_BN": 192, "BF_EPI_SMEM": 1, "BF_PP": 1, "BF_GELU_FAST": 1, "BF_RESID_PF": 1},
          "tma-epilogue-192": {"BF_OUT": 0, "BF_BN": 192, "BF_EPI_TMA": 1, "BF_GELU_FAST": 1, "BF_RESID_PF": 1},
          "tma-epilogue-bf16-out": {"BF_OUT": 1, "BF_EPI_TMA": 1},
          "programmatic-launch": {"BF_OUT": 0, "BF_PDL": 1, "BF_STAGES": 6},
          "tma-epilogue-3-buffers-traced": {"BF_OUT": 0, "BF_BN": 192, "BF_STAGES": 3, "BF_EPI_TMA": 1,
                                            "BF_EPI_TMA_BUFS": 3, "BF_TRACE": 1},
          "pingpong-tma-192-fp32": {"BF_OUT": 0, "BF_BN": 192, "BF_PP": 1, "BF_EPI_TMA": 1, "BF_EPI_SMEM": 1,
                                    "BF_GELU_FAST": 1, "BF_RESID_PF": 1},
          "pingpong-tma-192-bf16-traced": {"BF_OUT": 1, "BF_BN": 192, "BF_PP": 1, "BF_EPI_TMA": 1, "BF_STAGES": 3,
                                           "BF_EPI_TMA_BUFS": 4, "BF_GELU_FAST": 1, "BF_TRACE": 1}}


def families_of(defines) -> list:
    """v8 under every set; v9 (mma.sync) where the set touches its tunables or is the default."""
    return ["gemm_bf16_wgmma"] + (["gemm_bf16_mma"] if len(defines) == 1 or "BF9_BK" in defines else [])


@pytest.fixture(scope="module")
def bf16_reports():
    """{(set, kernel): ptxas report} of every set's families, compiled in parallel (one nvcc per core)."""
    import os
    from concurrent.futures import ThreadPoolExecutor
    jobs = [(key, k) for key, d in BUILDS.items() for k in families_of(d)]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        logs = pool.map(lambda job: build.compile_cubin("gemm.cu", build.kernel_defines(
            "gemm.cu", BUILDS[job[0]], job[1]), "sm_90a")[1], jobs)
        return dict(zip(jobs, logs))


@pytest.mark.skipif(build.nvcc_path() is None, reason="nvcc not installed")
@pytest.mark.parametrize("key", BUILDS)
def test_kernels_compile_without_spills_or_serialised_wgmma(key, bf16_reports):
    from test_kernels_compile import spills
    kernels = families_of(BUILDS[key])
    log = "".join(bf16_reports[key, k] for k in kernels)
    found = spills(log)
    assert set(kernels) <= set(found), "no ptxas report for the bf16 kernels"
    assert not {k: v for k, v in found.items() if v}, f"spills: {found}"
    # ptxas serialises wgmma (a large slowdown) when it cannot keep the accumulators in place; it says so
    assert "wgmma" not in log.lower().replace("gemm_bf16_wgmma", "").replace("gemm_wgmma", ""), log


def test_epilogue_warpgroup_launch_and_refusals():
    """BF_EPI_WG=1: 512 threads (a fourth warpgroup), the whole 128 x BF_BN fp32 tile staged in shared memory; tile
    widths and depths whose ring + staging exceed 227 KB refused in one line before anything compiles."""
    for bn, stages in ((128, 4), (192, 3)):
        rt, lin = dry("bf16_wgmma", {"BF_EPI_WG": 1, "BF_BN": bn, "BF_STAGES": stages})
        lin.bf_gemv = False
        assert lin.threads == 512
        assert lin.smem == stages * (128 + bn) * 64 * 2 + 16 * stages + 1024 + 128 * (bn + 8) * 4 <= 227 * 1024
        A, W = rt.pool.get("a", (8192, 768), BF16), rt.pool.get("w", (768, 768), BF16)
        lin(A, W, rt.pool.get("c", (8192, 768)), 8192, 768, 768, 768, 768, 768)
        assert [(g, b) for _, g, b, _ in rt.launches] == [((min(64 * -(-768 // bn), 264), 1, 1), (512, 1, 1))]
    for bn, stages in ((192, 4), (256, 2), (256, 4)):
        rt = RecordingRuntime()
        rt.arch = "sm_90a"
        with pytest.raises(GPUError, match="227 KB"):
            Linear(rt, "bf16_wgmma", {"BF_EPI_WG": 1, "BF_BN": bn, "BF_STAGES": stages}, "t")
        assert not rt.builds
    with pytest.raises(GPUError, match="128, 192 or 256"):
        dry("bf16_wgmma", {"BF_BN": 160})


def test_cluster_pairs_launch_and_map_box():
    """BF_CLUSTER=2: the grid is whole block pairs over row-tile pairs (an odd count of row tiles rounds up), W^T's
    map box is half the tile width (each block loads half, multicast to both), with the cooperative consumers and with
    the ping-pong ones and their TMA epilogue; BF_CLUSTER 3 refused."""
    made = []
    for (M, N), extra in itertools.product(((8192, 768), (300, 136), (128 * 23, 2304)),
                                           ({}, {"BF_PP": 1, "BF_EPI_TMA": 1, "BF_EPI_TMA_BUFS": 4})):
        rt, lin = dry("bf16_wgmma", {"BF_CLUSTER": 2, "BF_BN": 192, "BF_EPI_SMEM": 1, **extra})
        lin.bf_gemv = False
        lin._make_map = lambda *a: (made.append(a), bytes(128))[1]
        A, W = rt.pool.get("a", (M, 64), BF16), rt.pool.get("w", (N, 64), BF16)
        lin(A, W, rt.pool.get("c", (M, N)), M, N, 64, 64, 64, N)
        pairs = -(-(-(-M // 128)) // 2) * -(-N // 192)
        assert [(g, b) for _, g, b, _ in rt.launches] == [((2 * min(pairs, 264 // 2), 1, 1), (384, 1, 1))]
    assert {a[4] for a in made} == {128, 96, 64}      # A's box 128 rows, W^T's 192 / 2, C's 64 (BF_EPI_TMA)
    with pytest.raises(GPUError, match="BF_CLUSTER"):
        dry("bf16_wgmma", {"BF_CLUSTER": 3})


def test_programmatic_launch_takes_no_clusters():
    """BF_PDL=1 (session 17): refused with clusters in one line before compiling; otherwise the same launch."""
    rt = RecordingRuntime()
    with pytest.raises(GPUError, match="BF_PDL") as e:
        Linear(rt, "bf16_wgmma", {"BF_PDL": 1, "BF_CLUSTER": 2, "BF_BN": 192, "BF_EPI_SMEM": 1}, "t")
    assert "\n" not in str(e.value) and not rt.builds
    rt, lin = dry("bf16_wgmma", {"BF_PDL": 1, "BF_EPI_TMA": 1, "BF_BN": 192})
    v8 = [dict(d) for _, d in rt.builds if "KERNELS_BF16_WGMMA" in dict(d)]
    assert lin.pdl and v8 and all(d["BF_PDL"] == 1 for d in v8)


def test_cluster_quads_launch_and_map_boxes():
    """BF_CLUSTER=4 (session 11): the grid is whole 2 x 2 clusters over (row-tile pair, column-tile pair) groups (odd
    counts round up); A's map box is 64 rows and W^T's half the tile width (each block loads half of both)."""
    made = []
    for M, N in ((8192, 768), (300, 136), (128 * 23, 2304 - 5)):
        rt, lin = dry("bf16_wgmma", {"BF_CLUSTER": 4, "BF_BN": 256, "BF_EPI_SMEM": 1})
        lin.bf_gemv = False
        lin._make_map = lambda *a: (made.append(a), bytes(128))[1]
        A, W = rt.pool.get("a", (M, 64), BF16), rt.pool.get("w", (N, 64), BF16)
        lin(A, W, rt.pool.get("c", (M, N)), M, N, 64, 64, 64, N)
        quads = -(-(-(-M // 128)) // 2) * -(-(-(-N // 256)) // 2)
        assert [(g, b) for _, g, b, _ in rt.launches] == [((4 * min(quads, 264 // 4), 1, 1), (384, 1, 1))]
    assert {a[4] for a in made} == {64, 128}          # A's box 128 / 2 rows, W^T's 256 / 2

def test_pingpong_launch_smem_and_refusals():
    """BF_PP=1 (session 12): the same persistent grid and 384 threads, shared memory + the two turn mbarriers; the
    settings it cannot run (no staged epilogue, BF_EPI_WG, BF_EPI_PRE, clusters, BF_BN 256) refused before compiling;
    with BF_EPI_TMA (session 18) its staging chunks instead of BF_EPI_SMEM's."""
    rt, lin = dry("bf16_wgmma", {"BF_PP": 1, "BF_EPI_SMEM": 1, "BF_BN": 192, "BF_STAGES": 5})
    lin.bf_gemv = False
    assert lin.threads == 384 and lin.smem == 5 * (128 + 192) * 64 * 2 + 16 * 5 + 1024 + 2 * 64 * 40 * 4 + 16
    assert lin.smem <= 227 * 1024
    A, W = rt.pool.get("a", (8192, 768), BF16), rt.pool.get("w", (2304, 768), BF16)
    lin(A, W, rt.pool.get("c", (8192, 2304), BF16), 8192, 2304, 768, 768, 768, 2304)
    assert [(g, b) for _, g, b, _ in rt.launches] == [((264, 1, 1), (384, 1, 1))]   # the dry run: 2 x 132 slots
    for bad in ({"BF_EPI_SMEM": 0}, {"BF_EPI_WG": 1}, {"BF_EPI_PRE": 1}, {"BF_BN": 256}):
        rt = RecordingRuntime()
        rt.arch = "sm_90a"
        with pytest.raises(GPUError, match="BF_PP=1 needs"):
            Linear(rt, "bf16_wgmma", {"BF_PP": 1, "BF_EPI_SMEM": 1, **bad}, "t")
        assert not rt.builds
    # session 18: BF_PP with BF_EPI_TMA's staging instead of BF_EPI_SMEM's (2 fp32 chunks a warpgroup beside 4 stages,
    # 3 beside 3), C's map in the record as without BF_PP
    for stages, bufs in ((4, 2), (3, 3)):
        rt, lin = dry("bf16_wgmma", {"BF_PP": 1, "BF_EPI_TMA": 1, "BF_BN": 192, "BF_STAGES": stages, "BF_EPI_TMA_BUFS": 4})
        assert lin.epi_tma and lin.map_bytes == 640
        assert lin.smem == stages * ((128 + 192) * 64 * 2 + 16) + 1024 + 2 * bufs * 64 * 64 * 4 + 16 <= 227 * 1024


def test_256_row_tiles_launch_maps_and_refusals():
    """BF_BM=256 (session 14): 256-row tiles (the grid counts them), A's TMA box still 128 rows (two copies per k tile),
    shared memory for 256 + BF_BN operand rows a stage; what it cannot run with refused before compiling."""
    made = []
    for M, N, bn, stages in ((8192, 2304, 192, 3), (300, 136, 128, 4), (129, 770, 192, 2)):
        rt, lin = dry("bf16_wgmma", {"BF_BM": 256, "BF_EPI_SMEM": 1, "BF_BN": bn, "BF_STAGES": stages})
        lin.bf_gemv = False
        lin._make_map = lambda *a: (made.append(a), bytes(128))[1]
        assert lin.tile == (256, bn) and lin.threads == 384
        assert lin.smem == stages * (256 + bn) * 64 * 2 + 16 * stages + 1024 + 2 * 64 * 40 * 4 <= 227 * 1024
        A, W = rt.pool.get("a", (M, 64), BF16), rt.pool.get("w", (N, 64), BF16)
        lin(A, W, rt.pool.get("c", (M, N), BF16), M, N, 64, 64, 64, N)
        tiles = -(-M // 256) * -(-N // bn)
        assert [(g, b) for _, g, b, _ in rt.launches] == [((min(tiles, 264), 1, 1), (384, 1, 1))]
    assert {a[4] for a in made} == {128, 192}         # A's box 128 rows; W^T's the tile width
    for bad in ({"BF_EPI_SMEM": 0}, {"BF_EPI_WG": 1}, {"BF_EPI_PRE": 1}, {"BF_PP": 1}, {"BF_CLUSTER": 2},
                {"BF_BN": 256}, {"BF_BM": 192}):
        rt = RecordingRuntime()
        rt.arch = "sm_90a"
        with pytest.raises(GPUError, match="BF_BM is 128"):
            Linear(rt, "bf16_wgmma", {"BF_BM": 256, "BF_EPI_SMEM": 1, "BF_STAGES": 3, **bad}, "t")
        assert not rt.builds
    rt = RecordingRuntime()
    rt.arch = "sm_90a"
    with pytest.raises(GPUError, match="227 KB"):                  # 4 stages of 256 + 192 rows do not fit
        Linear(rt, "bf16_wgmma", {"BF_BM": 256, "BF_EPI_SMEM": 1, "BF_BN": 192, "BF_STAGES": 4}, "t")


def test_fast_epilogue_refusals():
    """BF_EPI_FAST=1 (session 14) rides on the staged epilogue; the settings it cannot run refused before compiling."""
    dry("bf16_wgmma", {"BF_EPI_FAST": 1, "BF_EPI_SMEM": 1, "BF_BN": 192})
    for bad in ({"BF_EPI_SMEM": 0}, {"BF_EPI_WG": 1}, {"BF_EPI_PRE": 1}, {"BF_PP": 1}, {"BF_BM": 256, "BF_STAGES": 3}):
        rt = RecordingRuntime()
        rt.arch = "sm_90a"
        with pytest.raises(GPUError, match="BF_EPI_FAST=1 needs"):
            Linear(rt, "bf16_wgmma", {"BF_EPI_FAST": 1, "BF_EPI_SMEM": 1, **bad}, "t")
        assert not rt.builds


def test_tma_epilogue_maps_smem_and_refusals():
    """BF_EPI_TMA=1 (session 15): each launch's map record carries C's map (fp32: 64 x 32 boxes, bf16: 64 x 64) in
    640-byte slots; shared memory holds the ring and 4 staged 64 x 64 fp32 chunks; C must be the residual itself
    (fp32, or bf16 since session 22), 16-byte aligned rows; a head-major QKV scatter with T a multiple of 64 carries Q's, K's and V's maps
    (session 16), other scatters run on no_tma_twin's build; the settings it cannot run refused before compiling."""
    rt, lin = dry("bf16_wgmma", {"BF_EPI_TMA": 1, "BF_EPI_SMEM": 1, "BF_BN": 192, "BF_EPI_PRE": 0})
    assert lin.in_place_residual(1000, 768) and not lin.in_place_residual(4, 768)   # M <= 8: the GEMV's rows
    lin.bf_gemv = False
    made = []
    lin._make_map = lambda *a: (made.append(a), bytes(128))[1]
    assert lin.smem == 4 * (128 + 192) * 64 * 2 + 16 * 4 + 1024 + 4 * 64 * 64 * 4 <= 227 * 1024
    M, N, K = 1000, 776, 64
    A, W = rt.pool.get("a", (M, K), BF16), rt.pool.get("w", (N, K), BF16)
    X, Y = rt.pool.get("x", (M, N)), rt.pool.get("y", (M, N), BF16)
    lin(A, W, X, M, N, K, K, K, N, Epilogue(resid=X))
    lin(A, W, Y, M, N, K, K, K, N, Epilogue(act=ACT_GELU))
    assert [a[4:] for a in made[2::3]] == [(64, 32, True), (64, 64, False)]        # C's boxes: rows, columns, fp32
    assert len(rt.launches) == 2
    # the scatter at T = 512 (B = 2, 12 heads of 64, pos 5): Q's, K's, V's maps, rows of one head's 64 values
    made.clear()
    Q = rt.pool.get("q", (2, 12, 512, 64), BF16)
    qkv = Epilogue(qkv=(Q, Q, 512, 5, 12, 64, 512, 600))
    lin(A, W, Q, 1024, 2304, K, K, K, 2304, qkv)
    assert [a[1:] for a in made[2:]] == [(2 * 12 * 512, 64, 64, 64, 64, False)] + [(2 * 12 * 600, 64, 64, 64, 64, False)] * 2
    # T = 1000 (not a multiple of 64), or pos on the device: the same constants without BF_EPI_TMA (its own maps)
    made.clear()
    lin(A, W, Y, M, N, K, K, K, N, Epilogue(qkv=(Y, Y, M, 0, 4, 64, M, M)))
    lin(A, W, Q, 1024, 2304, K, K, K, 2304, Epilogue(qkv=qkv.qkv, pos_dev=Q))
    assert not made and len(rt.launches) == 5
    assert not lin.no_tma_twin().epi_tma and lin.no_tma_twin().defines["BF_EPI_SMEM"] == 1
    # a bf16 C reduce-adds in place too (session 22), with C's bf16 boxes; (a residual elsewhere than C: the GPU
    # test; the dry run's buffers all sit at address 0)
    lin(A, W, Y, M, N, K, K, K, N, Epilogue(resid=Y))
    assert [a[3:] for a in lin._c_map_args(Y, M, N, N, Epilogue(resid=Y), True)] == [(N, 64, False)]
    assert len(rt.launches) == 6
    with pytest.raises(GPUError, match="16-byte rows"):
        lin(A, W, X, M, N - 2, K, K, K, N - 2)
    assert len(rt.launches) == 6
    for bad in ({"BF_PP": 1, "BF_BN": 256}, {"BF_EPI_WG": 1}, {"BF_EPI_PRE": 1}, {"BF_EPI_FAST": 1},
                {"BF_CLUSTER": 2, "BF_LNS": 1}, {"BF_TMA_PARAM": 1}, {"BF_BM": 256, "BF_STAGES": 3}):
        rt = RecordingRuntime()
        rt.arch = "sm_90a"
        with pytest.raises(GPUError, match="BF_EPI_TMA=1 needs|BF_PP=1 needs|BF_BM is 128|BF_EPI_FAST=1 needs"):
            Linear(rt, "bf16_wgmma", {"BF_EPI_TMA": 1, "BF_EPI_SMEM": 1, **bad}, "t")
        assert not rt.builds
    rt = RecordingRuntime()
    rt.arch = "sm_90a"
    with pytest.raises(GPUError, match="227 KB"):                  # 4 stages at 256 columns + the staging
        Linear(rt, "bf16_wgmma", {"BF_EPI_TMA": 1, "BF_BN": 256}, "t")


def test_gemm_group_defines_build_their_own_linear():
    """gemm_group_defines: the group's GEMM with its constants over the variant's; other groups keep the variant's."""
    import dataclasses
    from convnet import catalogue
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.model import GPT2Config, random_params
    v = catalogue.get("fast_bf16", "gpt2")
    v = dataclasses.replace(v, params={**v.params, "prefill_group_defines": {},
                                       "gemm_group_defines": {"mlp_fc": {"BF_BN": 256, "BF_EPI_WG": 0},
                                                                          "attn_proj": {"BF_EPI_WG": 1, "BF_BN": 128}}})
    config = GPT2Config(1, 2, 64, 300, 48)
    rt = RecordingRuntime()
    rt.arch = "sm_90a"
    gpu = GPT2GPU(random_params(config), config, v, rt)
    assert gpu._linear("mlp_fc").defines["BF_BN"] == 256 and gpu._linear("attn_proj").threads == 512
    assert gpu._linear("qkv") is gpu.linear and gpu.linear.defines["BF_BN"] == v.defines["BF_BN"]
    bad = dataclasses.replace(v, params={**v.params, "gemm_group_defines": {"mlp": {"BF_BN": 256}}})
    with pytest.raises(GPUError, match="gemm_group_defines"):
        GPT2GPU(random_params(config), config, bad, rt)


def test_bf16_picks_the_faster_kernel_per_shape():
    """Version "bf16": v9 at K <= 1024 with N <= 4096 (GPT-2's qkv, attn_proj, mlp_fc), v8 at mlp_proj and the LM
    head, v10 for decoding rows; off Hopper v9 everywhere. Same layout and storage as the two it drives."""
    rt, lin = dry("bf16")
    assert lin.w_layout == "nk" and lin.w_dtype == BF16 and lin.ldb(768, 2304) == 768
    for M, N, K in [(8192, 2304, 768), (8192, 768, 768), (8192, 3072, 768), (8192, 768, 3072), (8192, 50304, 768),
                    (1, 50304, 768)]:
        A, W, C = rt.pool.get("a", (M, K), BF16), rt.pool.get("w", (N, K), BF16), rt.pool.get("c", (M, N), BF16)
        lin(A, W, C, M, N, K, K, K, N)
    assert [n for n, *_ in rt.launches] == ["gemm_bf16_mma"] * 3 + ["gemm_bf16_wgmma"] * 2 + ["gemm_skinny_bf16_1"]
    rt8, lin8 = dry("bf16", arch="sm_86")
    assert lin8.bf_wgmma is None
    lin8(rt8.pool.get("a", (64, 3072), BF16), rt8.pool.get("w", (768, 3072), BF16), rt8.pool.get("c", (64, 768)),
         64, 768, 3072, 3072, 3072, 768)
    assert [n for n, *_ in rt8.launches] == ["gemm_bf16_mma"]
    with pytest.raises(GPUError, match="LayerNorm"):                 # tile rows: no LayerNorm prologue
        lin(rt.pool.get("x", (64, 768)), W, C, 64, 50304, 768, 768, 768, 50304, ln=(None, None, 1e-5))
    rt.launches.clear()                                               # decoding rows: v10's _ln build
    lin(rt.pool.get("x", (3, 768)), W, C, 3, 50304, 768, 768, 768, 50304, ln=(None, None, 1e-5))
    assert [n for n, *_ in rt.launches] == ["gemm_skinny_bf16_ln"]


@pytest.mark.parametrize("B", [1, 3])
def test_decode_pick_step_launches(B):
    """fast_bf16's and fast_bf16_dec's greedy device step (decode_pick): the LM head's _pick GEMV ends it, no
    argmax_rows, decode_advance or embed_bf16 launch (the previous LM head embedded the tokens): 5 launches per layer
    + 1 (fast_bf16 past one row: 7, its layers on v13 after two LayerNorm kernels, and its LM head on v14 without
    the pick: + 5; at one row 4, decode_attn_proj);
    fast_bf16_s9 takes 5 per layer
    + 4. A batch past the GEMV's 8 rows keeps the separate kernels."""
    from convnet import catalogue
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.model import GPT2Config, random_params
    config = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=64)
    counts = {}
    for name in ("fast_bf16_s9", "fast_bf16_dec", "fast_bf16"):
        rt = RecordingRuntime()
        gpu = GPT2GPU(random_params(config), config, catalogue.get(name, "gpt2"), rt)
        gpu.enqueue(np.zeros((B, 5), np.int32), pos=0, cap=9, last_only=True)
        before = len(rt.launches)
        gpu._device_step(B, 9)
        counts[name] = [k for k, *_ in rt.launches[before:]]
    assert len(counts["fast_bf16_s9"]) == 5 * config.n_layer + 4
    for name in ("fast_bf16_dec", "fast_bf16"):
        step = counts[name]
        # fast_bf16 past one row: v13 after two LayerNorm kernels; at one row its attention takes the projection
        per_layer = (7 if B > 1 else 4) if name == "fast_bf16" else 5
        # fast_bf16 folds one row's LayerNorm (decode_fold: the _lnf1 build); fast_bf16_dec keeps the prologue
        if name == "fast_bf16" and B > 1:     # its LM head past one row on v14 (BFM_GEMV_MMA): no pick
            assert len(step) == per_layer * config.n_layer + 5 and step[0] == "embed_bf16"
            assert step[-4].startswith("layernorm_warp_bf16")
            assert step[-3:] == ["gemm_gemv_mma_k8_bf16", "argmax_rows", "decode_advance"]
            continue
        pick = "gemm_skinny_bf16_ln_pick" if B > 1 else \
            "gemm_skinny_bf16_lnf1_pick" if name == "fast_bf16" else "gemm_skinny_bf16_ln1_pick"
        assert len(step) == per_layer * config.n_layer + 1 and step[-1] == pick
        assert not {"argmax_rows", "decode_advance", "embed_bf16"} & set(step)
    rt = RecordingRuntime()
    gpu = GPT2GPU(random_params(config), config, catalogue.get("fast_bf16_dec", "gpt2"), rt)
    assert gpu._picks(8) and not gpu._picks(9)


def test_device_call_precompile_collects_the_gemm_tests_builds(monkeypatch):
    """tools/precompile_device_call.py with GEMM=1 (session 18): test_gpu_gemm_bf16's v8 sets, both output types, and
    for BF_EPI_TMA sets the no_tma_twin builds their scatters fall back to (else compiled one by one on the device)."""
    import precompile_device_call
    from test_gpu_gemm_bf16 import TMA
    for key in ("VARIANTS", "MODELS", "MAINS", "LENET"):
        monkeypatch.setenv(key, "")
    monkeypatch.setenv("GENERATE", "0")
    monkeypatch.setenv("GEMM", "1")
    from convnet.gpu.build import kernel_defines

    def v8_builds():       # the v8 family's builds among those collected
        return {(f, tuple(sorted(d))) for f, d in precompile_device_call.collect("sm_90a")
                if "KERNELS_BF16_WGMMA" in dict(d)}

    def v8_build(d, out):  # the v8 build of a set of constants (those v8's text names)
        return "gemm.cu", tuple(sorted(kernel_defines("gemm.cu", {**d, "BF_OUT": out}, "gemm_bf16_wgmma").items()))
    builds = v8_builds()
    for tma in (TMA[0], next(d for d in TMA if d.get("BF_PP"))):
        twin = {k: v for k, v in tma.items() if k not in ("BF_EPI_TMA", "BF_EPI_TMA_BUFS")} | {"BF_EPI_SMEM": 1}
        for d in (tma, twin):
            for out in (0, 1):
                assert v8_build(d, out) in builds, (d, out)
    from test_gpu_gemm_bf16 import LNS_IN, PDL
    monkeypatch.setenv("GEMM", "PDL+LNS_IN")                       # named sets alone, without twins
    assert v8_builds() == {v8_build(d, out) for d in PDL + LNS_IN for out in (0, 1)}
    monkeypatch.setenv("GEMM", "0")
    assert not precompile_device_call.collect("sm_90a")
