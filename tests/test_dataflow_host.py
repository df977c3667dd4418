"""The dataflow decode kernel's host side without a GPU: the argument block matches decode_dataflow.cu's DFArgs field
for field, the flagged-word buffer and the ring match the kernel's sizes, every block's share of rows stays inside the
kernel's shared-memory arrays at every GPT-2 width on the SM counts of current GPUs, and what it cannot run is
refused in one line."""
import re

import pytest

from convnet.errors import UsageError
from convnet.gpt2 import dataflow as df
from convnet.gpt2 import model as ref
from convnet.paths import KERNELS_DIR

TEXT = (KERNELS_DIR / df.KERNEL_FILE).read_text()
WIDTHS = [(768, 12), (1024, 16), (1280, 20), (1600, 25)]


def defines() -> dict:
    """The kernel's #define constants (DF_*) as numbers, each evaluated over the ones before it."""
    out = {}
    for name, expr in re.findall(r"^#define (DF_\w+) (.+)$", TEXT, re.M):
        expr = expr.split("//")[0]
        try:
            out[name] = eval(re.sub(r"DF_\w+", lambda m: str(out[m.group(0)]), expr).replace("/", "//"))
        except (KeyError, NameError, SyntaxError):
            continue
    return out


def test_argument_block_matches_the_kernel_struct():
    body = re.search(r"struct DFArgs \{(.*?)\n\};", TEXT, re.S).group(1)
    kinds = []
    for line in body.splitlines():
        decl = line.split("//")[0].strip().rstrip(";")
        if decl:
            kind = "ptr" if "*" in decl else decl.split()[0]
            names = decl.split("*", 1)[1] if kind == "ptr" else decl.split(None, 1)[1]
            kinds += [kind] * len([n for n in names.split(",") if n.strip()])
    # 8-byte fields (the pointers, then the seed), the ints, the epoch, the floats
    assert kinds == ["ptr"] * 16 + ["unsigned"] + ["int"] * 11 + ["unsigned"] + ["float"] * 5
    assert df.ARG_LAYOUT == (17, 11, 5)
    packed = df.pack_args(list(range(1, 17)) + [2 ** 64 - 3], [2] * 11, 1, [3.0, 4.0, 5.0, 6.0, 7.0])
    assert len(packed) == 208 and packed[128:136] == (2 ** 64 - 3).to_bytes(8, "little")
    assert packed[136:140] == (2).to_bytes(4, "little")
    assert packed[180:184] == (1).to_bytes(4, "little")          # epoch after the eleven ints
    with pytest.raises(ValueError):
        df.pack_args([1] * 16, [2] * 11, 1, [3.0] * 5)


def test_sizes_match_the_kernel():
    d = defines()
    assert (d["DF_WORDS"], d["DF_SLOTS"], d["DF_SLOT_BYTES"], d["DF_CMAX"], d["DF_GMAX"], d["DF_BIAS"], d["DF_ROWS"],
            d["DF_ROW_PAD"], d["DF_TMAX"], d["DF_LMAX"]) == (df.WORDS, df.SLOTS, df.SLOT_BYTES, df.CMAX, df.GMAX,
                                                             df.BIAS_ROWS, df.HEAD_ROWS, df.ROW_PAD, df.TILES,
                                                             df.LAYERS)
    assert d["DF_THREADS"] == df.THREADS
    assert (d["DF_PASSES"], d["DF_SCRATCH"]) == (df.PASSES, df.SCRATCH)


@pytest.mark.parametrize("G", [108, 114, 132, 144])
@pytest.mark.parametrize("C,H", WIDTHS)
def test_shares_fit_the_kernel_arrays(C, H, G):
    """The kernel's Share: block b owns units [b U / G, (b + 1) U / G); tiles of at most one slot."""
    assert df.model_refusal(ref.GPT2Config(12, H, C, 50257, 1024), "sm_90a", G) is None
    assert_shares_fit(C, G)


def test_every_width_it_takes_fits_its_arrays_or_is_refused():
    """Every n_embd the kernel takes (multiples of 64 up to 1,600) on GPUs of 78 to 256 SMs: either model_refusal
    names why, or each share's rows, its tiles of at most one slot and the ring fit the kernel's arrays and an SM's
    shared memory (the slot rule changes at 1,024 wide; GPT-2's sizes are four of these widths)."""
    taken = 0
    for C in range(64, df.CMAX + 1, 64):
        slot = df.slot_bytes(C)
        assert slot % 16 == 0 and df.SHARED_BYTES + df.SLOTS * slot <= 227 * 1024
        for G in (78, 108, 114, 132, 144, 170, 256):
            if not df.model_refusal(ref.GPT2Config(12, C // 64, C, 50257, 1024), "sm_90a", G):
                taken += 1
                assert_shares_fit(C, G)
    assert taken > 100


def assert_shares_fit(C: int, G: int):
    """Each share of width C on G blocks: its rows within the kernel's arrays, its tiles within one slot and the
    plan's tile table, the kernel's int products within range."""
    slot = df.slot_bytes(C)
    for N, K, unit, most in ((3 * C, C, 1, df.BIAS_ROWS), (C, C, 1, df.BIAS_ROWS), (4 * C, C, 2, df.BIAS_ROWS),
                             (C, 4 * C, 1, df.BIAS_ROWS), (50257, C, 1, df.HEAD_ROWS)):
        U = N // unit
        rows = max(((b + 1) * U // G - b * U // G) * unit for b in range(G))
        assert rows <= most, (C, G, N, K)
        per = max(1, slot // (2 * K + df.ROW_PAD) // unit)
        assert (2 * K + df.ROW_PAD) * unit * per <= slot and tiles_fit(rows, unit, per), (C, G, N, K)
        assert -(-rows // unit // per) <= df.TILES, (C, G, N, K)     # the plan's tile table
        assert U * G < 2 ** 31                                    # the kernel's int products


@pytest.mark.parametrize("sm", [78, 114, 132, 144])
@pytest.mark.parametrize("C,H", WIDTHS)
def test_default_grid_keeps_every_stage_s_tiles_and_fits(C, H, sm):
    """Below xl's width the launch takes every SM; from it about 91 % of them, never so few that a layer stage's
    block takes more tiles than on every SM (the tiles counted here as the kernel's Share cuts them, independently of
    dataflow.share_tiles)."""
    G = df.default_grid(C, sm)
    if C < df.PREFERRED_FROM:
        assert G == sm
    else:
        assert int(df.WIDE_GRID_SHARE * sm) <= G < sm
    slot = df.slot_bytes(C)
    for N, K, unit in ((3 * C, C, 1), (C, C, 1), (4 * C, C, 2), (C, 4 * C, 1)):
        per = max(1, slot // (2 * K + df.ROW_PAD) // unit)
        most = lambda g: max(-(-((b + 1) * (N // unit) // g - b * (N // unit) // g) // per) for b in range(g))  # noqa: E731
        assert most(G) == most(sm), (C, sm, G, N, K)
    assert df.model_refusal(ref.GPT2Config(48, H, C, 50257, 1024), "sm_90a", G) is None
    assert_shares_fit(C, G)


def test_xl_on_132_sms_takes_120_blocks_and_df_grid_overrides_it():
    assert df.default_grid(1600, 132) == 120 and df.layer_tiles(1600, 120) == df.layer_tiles(1600, 132)
    assert df.layer_tiles(1600, 110) != df.layer_tiles(1600, 132)          # (110 blocks: 768 tokens/s, measured)
    assert df.grid_of(0, 1600, 132) == 120 and df.grid_of(0, 768, 132) == 132
    assert df.grid_of(96, 768, 132) == 96
    for bad, words in ((133, "do not fit"), (-1, "a count of blocks"), ("120x", "a count of blocks")):
        with pytest.raises(UsageError) as e:
            df.grid_of(bad, 1600, 132)
        assert words in str(e.value) and "\n" not in str(e.value)


def test_the_dry_run_takes_the_default_grid_too():
    """The dry run's stand-in GPU (132 SMs) gets the grid a real one of 132 SMs would: 120 blocks at xl's width, every
    SM at 124M's."""
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpu.recorder import RecordingRuntime
    from helpers import spec_variant
    assert RecordingRuntime.sm_count == 132
    for C, H, want in ((1600, 25, 120), (768, 12, 132)):
        config = ref.GPT2Config(2, H, C, 999, 64)
        gpu = GPT2GPU(ref.random_params(config, 0), config, spec_variant("fast_bf16_df"), RecordingRuntime())
        assert gpu.mega.grid == want


def test_df_grid_is_a_checked_param():
    from convnet import catalogue
    v = catalogue.variant_spec("fast_bf16_df@df_grid=120", "gpt2")
    assert v.params["df_grid"] == 120
    with pytest.raises(Exception) as e:
        catalogue.variant_spec("fast_bf16_df@df_grid=many", "gpt2")
    assert "df_grid" in str(e.value)


def test_slot_bytes_by_width():
    """The default slot up to medium's width; wider, the most whole rows of K = C that leave four slots in an SM's
    227 KB beside the rest: large's 18 rows (4 of K = 4 C), xl's 14 (3 of K = 4 C)."""
    assert [df.slot_bytes(C) for C, _ in WIDTHS[:2]] == [df.SLOT_BYTES] * 2
    for C, rows, rows_4c in ((1280, 18, 4), (1600, 14, 3)):
        slot = df.slot_bytes(C)
        assert slot // (2 * C + df.ROW_PAD) == rows and slot // (8 * C + df.ROW_PAD) == rows_4c
        assert slot % (2 * C + df.ROW_PAD) == 0
        assert slot % 16 == 0 and df.SHARED_BYTES + df.SLOTS * slot <= 227 * 1024
        assert df.SHARED_BYTES + df.SLOTS * (slot + 2 * C + df.ROW_PAD) > 227 * 1024   # one row more does not fit


def tiles_fit(rows: int, unit: int, per: int) -> bool:
    tiles = -(-rows // unit // per) if rows else 0
    return all(((i + 1) * (rows // unit) // tiles - i * (rows // unit) // tiles) <= per for i in range(tiles))


def test_refusals_are_one_line():
    big = ref.GPT2Config(12, 12, 768, 50257, 1024)
    for config, arch, G, words in ((ref.GPT2Config(2, 4, 128, 100, 64), "sm_90a", 132, "head size 64"),
                                   (ref.GPT2Config(2, 32, 2048, 100, 64), "sm_90a", 132, "up to 1600"),
                                   (big, "sm_80", 132, "Hopper"), (big, "sm_90a", 300, "at most 256 SMs"),
                                   (big, "sm_90a", 40, "LM head"),
                                   (ref.GPT2Config(65, 12, 768, 50257, 1024), "sm_90a", 132, "at most 64 layers")):
        why = df.model_refusal(config, arch, G)
        assert words in why and "\n" not in why
    assert "one sequence" in df.batch_refusal(2) and df.batch_refusal(1) is None


def test_trace_table_reads_the_kernel_stamps():
    """convnet-bench megakernel --trace --variants fast_bf16_df: synthetic stamps in decode_dataflow.cu's DF_TRACE
    layout (event e of layer l of token k at k 100 us + l 10 us + e us, block b b ns later; the attention events
    only on block 0; the LM head 5 us and the choice 7 us after the token's last layer starts) read back as 1 us a
    step, the head's 6 us, the choice's 2 us and 100 us a token."""
    import numpy as np
    from convnet.bench.megakernel import DATAFLOW_EVENTS, dataflow_trace_table
    G, tokens, L = 4, 5, 3
    s = np.zeros((G, tokens, 10 * L + 11), np.uint64)
    for b in range(G):
        for k in range(tokens):
            for layer in range(L):
                for e in range(10):
                    if e not in (2, 3) or b == 0:
                        s[b, k, 10 * layer + e] = k * 100_000 + layer * 10_000 + e * 1000 + b
            s[b, k, 10 * L:10 * L + 3] = [k * 100_000 + L * 10_000 + d + b for d in (0, 5000, 7000)]
    rows = dataflow_trace_table(s, L, [0])
    assert len(rows) == len(DATAFLOW_EVENTS) + 3
    # last block to last block: 1 us a step; a block's own: 1 us, but "y in" counts from its qkv rows (3 us on the
    # three blocks without an attention event)
    own = ["3.00" if name == "y in" else "1.00" for name in DATAFLOW_EVENTS]
    assert [r for r in rows[:len(DATAFLOW_EVENTS)]] == [f"| {n} | 1.00 | {o} |" for n, o in zip(DATAFLOW_EVENTS, own)]
    assert rows[-3].endswith("| 6.00 | |") and rows[-2].endswith("| 2.00 | |") and rows[-1].endswith("| 100.00 | |")


def test_dataflow_counter_table_reads_cycles_a_token():
    """The DF_TRACE counters are cumulative over the launch, stamped before (10 L + 3 + 2 i) and after (+ 1) each
    token's head: token k's layers are the difference to token k - 1's after-stamp, its head the difference within."""
    import numpy as np
    from convnet.bench.megakernel import DATAFLOW_COUNTERS, dataflow_counter_table
    G, tokens, L = 3, 4, 2
    s = np.zeros((G, tokens, 10 * L + 11), np.uint64)
    for i, (_, k) in enumerate(DATAFLOW_COUNTERS):
        per_layers, per_head = 1000 * (i + 1), 100 * (i + 1)
        for t in range(tokens):
            s[:, t, 10 * L + k] = t * (per_layers + per_head) + per_layers          # before the head
            s[:, t, 10 * L + k + 1] = (t + 1) * (per_layers + per_head)             # after it
    rows = dataflow_counter_table(s, L)
    assert rows == [f"| {name} | {1000 * (i + 1):,} | {100 * (i + 1):,} |"
                    for i, (name, _) in enumerate(DATAFLOW_COUNTERS)]


@pytest.mark.parametrize("C,H,arch,sms,want", [(768, 12, "sm_90a", 132, False), (1024, 16, "sm_90a", 132, False),
                                               (1280, 20, "sm_90a", 132, False), (1600, 25, "sm_90a", 132, True),
                                               (1536, 24, "sm_90a", None, True), (1600, 25, "sm_80", 108, False),
                                               (1600, 20, "sm_90a", 132, False), (1600, 25, "sm_90a", 300, False)])
def test_auto_takes_the_kernel_where_it_is_ahead_and_runs(C, H, arch, sms, want):
    """decode = "auto" (fast_bf16): the dataflow kernel from dataflow.PREFERRED_FROM wide (ahead of the step graphs
    at xl on the H200, even at large), and only where it runs the model (Hopper, head size 64, up to 256 SMs)."""
    assert df.preferred(ref.GPT2Config(12, H, C, 50257, 1024), arch, sms) is want


@pytest.mark.parametrize("C,H,persistent", [(768, 12, False), (1280, 20, False), (1600, 25, True)])
def test_fast_bf16_decodes_one_sequence_on_the_kernel_from_xl_wide(C, H, persistent):
    """fast_bf16's GPT2GPU off the GPU (the dry run): the dataflow kernel as its persistent decode kernel at xl's width
    only; past one sequence its steps run either way (the kernel's batch refusal)."""
    import numpy as np
    from convnet import catalogue
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpu.recorder import RecordingRuntime
    config = ref.GPT2Config(1, H, C, 64, 128)
    with np.errstate(all="ignore"):
        gpu = GPT2GPU(ref.random_params(config), config, catalogue.get("fast_bf16", "gpt2"), RecordingRuntime())
    assert isinstance(gpu.mega, df.DecodeDataflow) is persistent
    assert gpu.mega_takes(1) is persistent and not gpu.mega_takes(2)


def test_auto_runs_the_steps_where_the_kernel_cannot_load(monkeypatch):
    """decode = "auto" on a GPU where the kernel's block does not fit (its launcher refuses in one line): fast_bf16
    runs the step graphs at xl's width; fast_bf16_df, which names the kernel, passes the refusal on."""
    import numpy as np
    from convnet import catalogue
    from convnet.errors import UsageError
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpu.recorder import RecordingRuntime

    def refuse(gpu, params):
        raise UsageError("the dataflow decode kernel's block does not fit an SM of this GPU")

    monkeypatch.setattr(df, "DecodeDataflow", refuse)
    config = ref.GPT2Config(1, 25, 1600, 64, 128)
    params = ref.random_params(config)
    with np.errstate(all="ignore"):
        gpu = GPT2GPU(params, config, catalogue.get("fast_bf16", "gpt2"), RecordingRuntime())
        assert gpu.mega is None and not gpu.mega_takes(1)
        with pytest.raises(UsageError, match="does not fit"):
            GPT2GPU(params, config, catalogue.get("fast_bf16_df", "gpt2"), RecordingRuntime())


def test_the_sampler_build_serves_a_temperature_or_a_penalty():
    """needs_sampler: launches and the trace take the DF_SAMPLER=1 build for a temperature or a repetition penalty
    (greedy with a penalty too), the greedy build otherwise."""
    from convnet.gpt2.generate import Sampling
    assert not df.needs_sampler(None) and not df.needs_sampler(Sampling())
    assert not df.needs_sampler(Sampling(0.0, top_k=40))
    assert df.needs_sampler(Sampling(0.8, top_p=0.9)) and df.needs_sampler(Sampling(0.0, repetition_penalty=1.2))
