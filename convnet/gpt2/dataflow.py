"""GPT-2 greedy decode steps of one sequence as one persistent kernel whose blocks wait on flagged data words
(kernels/decode_dataflow.cu; variant param decode = "dataflow").

The launcher has DecodeMegakernel's interface (gpu.py and gpu_generate.py drive either): `tokens` greedy steps a
launch, or in logits mode one step's logits for sampling.cu's samplers. It also samples inside the kernel
(`sampling`: sample_tokens' choice, the same token from the same logits), so sampled runs take `tokens` steps a
launch too. Only B = 1: other batches run the variant's decode steps. The kernel's shape limits are refused here in
one line before anything is compiled."""
from __future__ import annotations

import math

import numpy as np

from ..errors import UsageError
from .megakernel import CHUNK, _addr, refuse_launch

KERNEL_FILE = "decode_dataflow.cu"
KERNEL = "decode_dataflow"
THREADS = 256 + 32                # consumers and the producer warp
CMAX, HEAD_DIM, GMAX, BIAS_ROWS, HEAD_ROWS = 1600, 64, 256, 256, 1024     # DF_CMAX, DF_GMAX, DF_BIAS, DF_ROWS
SLOTS, SLOT_BYTES = 4, 37888      # decode_dataflow.cu's DF_SLOTS, DF_SLOT_BYTES (a tile is at most one slot)
ROW_PAD = 16                      # DF_ROW_PAD: bytes after each weight row in a slot
TILES = 128                       # DF_TMAX: tiles of one block's share at most
LAYERS = 64                       # DF_LMAX: layers at most (the kernel keeps the layer table in shared memory)
WORDS = CMAX + 3 * CMAX + CMAX // 2 + CMAX + 2 * CMAX + 4 * GMAX + 2  # DF_WORDS: the flagged words
SHARED_BYTES = 1024 + 45552      # df_smem_bytes less the slots (the dry run has no GPU to ask)
PASSES, BINS = 8, 256            # DF_PASSES: the in-kernel sampler's radix passes a token at most, of 256 bins
SCRATCH = 1 + PASSES * BINS      # DF_SCRATCH: a sampled token's scratch (barrier arrivals, the passes' histograms)
MAX_SLOT_BYTES = (227 * 1024 - SHARED_BYTES) // SLOTS // 16 * 16      # four slots in an SM's shared memory


def slot_bytes(C: int) -> int:
    """DF_SLOT_BYTES for width C: 37,888 up to 1,024 wide; wider, the most whole rows of K = C that leave four slots
    in an SM's 227 KB beside the rest (large's 1,280: 18 rows, 46,368 bytes; xl's 1,600: 14 rows, 45,024). Each
    share then takes fewer, fuller tiles: at xl on 132 SMs a block's 37 qkv rows three tiles, not four, its 48 MLP
    rows four, not five, its 12 rows of the attention projection one, and the MLP projection's tiles 3 rows of 6,400,
    not 2. H200, one process each: xl 778-781 tokens/s against 764-765 with 12-row slots and 726 with 37,888 bytes;
    large 1,377 against 1,317; medium 2,480-2,483 against 2,545 and 124M 5,423 against 5,494 (larger slots slower
    there, so they keep the default)."""
    if C <= 1024:
        return SLOT_BYTES
    row = 2 * C + ROW_PAD
    return max(SLOT_BYTES, MAX_SLOT_BYTES // row * row)


def model_refusal(config, arch: str, sm_count: int | None = None) -> str | None:
    """Why the dataflow decode kernel cannot run this model on this GPU, or None."""
    C, H = config.n_embd, config.n_head
    if arch != "sm_90a":
        return f"the dataflow decode kernel needs a Hopper GPU (sm_90: bulk copies, mbarriers); this one is {arch}"
    if C % H or C // H != HEAD_DIM:
        return f"the dataflow decode kernel takes head size {HEAD_DIM}; n_embd {C} / n_head {H} is not"
    if C > CMAX or C % HEAD_DIM:
        return f"the dataflow decode kernel takes n_embd a multiple of {HEAD_DIM} up to {CMAX}; got {C}"
    if config.n_layer > LAYERS:
        return f"the dataflow decode kernel takes at most {LAYERS} layers; got {config.n_layer}"
    if sm_count is not None:
        if sm_count > GMAX:
            return f"the dataflow decode kernel runs on at most {GMAX} SMs; this GPU has {sm_count}"
        if -(-4 * C // sm_count) > BIAS_ROWS:
            return f"the dataflow decode kernel's share of rows at n_embd {C} on {sm_count} SMs exceeds {BIAS_ROWS}"
        if -(-config.vocab_size // sm_count) > HEAD_ROWS:
            return (f"the dataflow decode kernel's share of the LM head ({config.vocab_size} rows on {sm_count} SMs) "
                    f"exceeds {HEAD_ROWS} rows a block")
    return None


PREFERRED_FROM = 1536              # n_embd from which decode = "auto" takes this kernel (preferred)


def preferred(config, arch: str, sm_count: int | None = None) -> bool:
    """decode = "auto" (fast_bf16): whether one sequence's decode steps run on this kernel rather than the step
    graphs. It runs the model and is ahead of them: from PREFERRED_FROM wide. At B = 1 on the H200 (one process a
    size, the steps in the same process) it was ahead at xl (1,600 wide: 775-781 tokens/s against 731-732 greedy, 810
    against 733 on default_grid's 120 blocks, 761 against 697 sampled), even at large (1,377 against 1,380) and
    behind at medium and 124M (2,545 against 2,733; 5,557-5,597 against 6,100-6,116)."""
    return config.n_embd >= PREFERRED_FROM and model_refusal(config, arch, sm_count) is None


def share_tiles(N: int, K: int, unit: int, G: int, slot: int) -> int:
    """The most tiles any block's share of an N x K weight takes on G blocks (the kernel's Share: block b owns units
    [b U / G, (b + 1) U / G) of `unit` rows, in tiles of at most one slot)."""
    U, per = N // unit, max(1, slot // (2 * K + ROW_PAD) // unit)
    return max(-(-((b + 1) * U // G - b * U // G) // per) for b in range(G))


def layer_tiles(C: int, G: int) -> tuple:
    """The most tiles a block takes in each of a layer's four GEMV stages (qkv, projection, MLP up, MLP projection)
    on G blocks."""
    slot = slot_bytes(C)
    return tuple(share_tiles(N, K, unit, G, slot) for N, K, unit in ((3 * C, C, 1), (C, C, 1), (4 * C, C, 2),
                                                                     (C, 4 * C, 1)))


WIDE_GRID_SHARE = 0.91             # from PREFERRED_FROM wide: the share of the SMs the launch takes by default


def default_grid(C: int, sm_count: int) -> int:
    """The launch's blocks when param df_grid is 0: every SM below PREFERRED_FROM wide; from it, WIDE_GRID_SHARE of
    them, or the fewest above that which keep every layer stage's tiles a block as on every SM. At xl on the H200
    (132 SMs, one process, greedy B = 1): 116, 120, 124 and 128 blocks ran 805, 810, 810 and 804 tokens/s against
    783-784 on 132; 110 (four qkv tiles a block instead of three) 768. The trace puts the gain in the hand-overs
    that every block polls (the MLP's hidden row: 1.74 -> 0.86 us a layer, x: 1.57 -> 1.39), the LM head's 40 us
    taking 2.7 more. Narrower it lost (124M: 100 and 120 blocks 5,202 and 5,171 against 5,551; medium: 128 blocks
    2,480 against 2,519) or was even (large, 108-124 blocks)."""
    if C < PREFERRED_FROM:
        return sm_count
    full, G = layer_tiles(C, sm_count), max(1, int(WIDE_GRID_SHARE * sm_count))
    while G < sm_count and layer_tiles(C, G) != full:
        G += 1
    return G


def grid_of(df_grid: int, C: int, sm_count: int) -> int:
    """The launch's blocks: param df_grid (at most the GPU's SMs: the launch is cooperative, a block an SM) or, at 0,
    default_grid."""
    if isinstance(df_grid, bool) or not isinstance(df_grid, int) or df_grid < 0:
        raise UsageError(f"param df_grid takes a count of blocks (0: the default); got {df_grid!r}")
    if not df_grid:
        return default_grid(C, sm_count)
    if df_grid > sm_count:
        raise UsageError(f"param df_grid: {df_grid} blocks do not fit this GPU's {sm_count} SMs (a block an SM)")
    return df_grid


def needs_sampler(sampling) -> bool:
    """Whether a launch with this generate.Sampling (None: greedy) runs the sampler's build (DF_SAMPLER=1): a
    temperature or a repetition penalty; greedy choices stay in the greedy build."""
    return sampling is not None and (sampling.temperature > 0 or sampling.repetition_penalty != 1)


def batch_refusal(B: int) -> str | None:
    if B != 1:
        return f"the dataflow decode kernel runs one sequence; got {B}"
    return None


class DecodeDataflow:
    """The dataflow decode kernel of one GPT2GPU (bf16 weights): weight table, arguments, launches."""

    batch_refusal = staticmethod(batch_refusal)

    def __init__(self, gpu, params: dict):
        from ..gpu.runtime import Runtime
        rt, cfg = gpu.rt, gpu.cfg
        real = isinstance(rt, Runtime)
        # param df_grid: the blocks of the launch (0: default_grid); fewer blocks take larger shares (the dry run:
        # its stand-in GPU's SMs, but no refusal by them)
        self.grid = grid_of(gpu.variant.params.get("df_grid", 0), cfg.n_embd, rt.sm_count)
        why = model_refusal(cfg, rt.arch, self.grid if real else None)
        if why:
            raise UsageError(f"variant {gpu.variant.name}: {why}")
        self.gpu, self.rt = gpu, rt
        self.defines = {k: v for k, v in gpu.variant.defines.items() if k.startswith("DF_")}
        # param df_sampling (default on): sampled runs draw inside the kernel, `tokens` steps a launch (off: a launch
        # a step to the logits, then sampling.cu's samplers; the same tokens)
        self.samples = bool(gpu.variant.params.get("df_sampling", True))
        slot = slot_bytes(cfg.n_embd)
        if "DF_SLOT_BYTES" not in self.defines and slot != SLOT_BYTES:
            self.defines["DF_SLOT_BYTES"] = slot
        self.real = real
        if real:
            g, _ = rt.module(KERNEL_FILE, self.defines).get_global("df_smem_bytes")
            out = np.zeros(1, np.uint64)
            rt.drv.memcpy_dtoh(out, g)
            self.smem = int(out[0])
        else:
            self.smem = SHARED_BYTES + SLOTS * int(self.defines.get("DF_SLOT_BYTES", SLOT_BYTES))
        self.kernel = self._load(self.defines)
        # the build with the in-kernel sampler (DF_SAMPLER=1), made at the first sampled launch; its code in the
        # greedy build cost 124M's greedy steps 2.5 % (5,401-5,465 tokens/s against 5,566-5,599, H200), so greedy
        # and logits launches keep a build without it. A dry run records it now (make kernels, the compile test).
        self._sampler = None if real else self._load({**self.defines, "DF_SAMPLER": 1})
        L, w, pool = cfg.n_layer, gpu.w, rt.pool
        table = np.zeros((L, 10), np.uint64)
        for i in range(L):
            h = f"h.{i}."
            table[i] = [_addr(w[h + k]) for k in ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                                                  "mlp.c_proj.weight", "attn.c_attn.bias", "attn.c_proj.bias",
                                                  "mlp.c_fc.bias", "mlp.c_proj.bias", "ln_1.pair", "ln_2.pair")]
        self.table = pool.upload("gpt2.w.df_layers", table, np.uint64)

    def _load(self, defines: dict):
        """The cooperative kernel of one build (the dry run's recording stand-in off the GPU)."""
        rt, name = self.rt, self.gpu.variant.name
        kernel = rt.kernel(KERNEL_FILE, KERNEL, defines, name)
        if not self.real:
            return kernel
        from ..gpu import build, tma
        kernel = tma.CooperativeKernel(build.kernel_cubin(KERNEL_FILE, defines, KERNEL, rt.arch), KERNEL, name)
        kernel.allow_shared(self.smem)
        if kernel.max_blocks_per_sm(THREADS, self.smem) < 1:
            raise UsageError(f"the dataflow decode kernel's block ({THREADS} threads, {self.smem} bytes of shared "
                             f"memory) does not fit an SM of {rt.name}")
        return kernel

    def launch(self, B: int, cap: int, tokens: int, out=None, logits=None, done=None, step=None, pad: int = -1,
               stream=None, trace=None, sampling=None, seen=None, row: int = 0):
        """As DecodeMegakernel.launch: `tokens` steps (out: (tokens, 1) int32) or, with logits ((1, Vp) fp32), one
        step's logits; reads and advances gpt2.act.step_idx, gpt2.act.pos and the KV cache of capacity cap (the
        caller keeps pos + tokens within cap). Steps are greedy, or with `sampling` (a checked generate.Sampling)
        sample_tokens' choice for sequence `row` at the device counter `step` (0 without), with the repetition
        penalty on the tokens marked in `seen` ((1, ceil(V / 32)) uint32 bits, kept up to date by the kernel)."""
        refuse_launch(batch_refusal(B), tokens, logits, "the dataflow decode kernel")
        if sampling is not None and logits is not None:
            raise UsageError("the dataflow decode kernel either samples or writes logits, not both")
        gpu, rt = self.gpu, self.rt
        cfg, C, H, L = gpu.cfg, gpu.C, gpu.H, gpu.cfg.n_layer
        pool = rt.pool
        lo = np.uint16
        words = pool.get("gpt2.df.words", (WORDS,), np.uint64)
        ptrs = [_addr(a) for a in (self.table, gpu.w["lm_head"], gpu.w["ln_f.pair"], gpu.w["wpe"],
                                   pool.get("gpt2.act.kcache", (L, 1, H, cap, HEAD_DIM), lo),
                                   pool.get("gpt2.act.vcache", (L, 1, H, cap, HEAD_DIM), lo), words, logits,
                                   pool.get("gpt2.act.step_idx", (1, 1), np.int32),
                                   pool.get("gpt2.act.pos", (1,), np.int32), step, done, out, trace)]
        s = sampling
        sample = needs_sampler(s)
        scratch = None
        if sample:
            if s.repetition_penalty != 1 and seen is None:
                raise UsageError("the repetition penalty needs the tokens seen (seen=)")
            if tokens > CHUNK:
                raise UsageError(f"the dataflow decode kernel samples at most {CHUNK} tokens a launch; got {tokens}")
            # each token's grid barrier and radix passes' histograms (global sums), zeroed each launch
            scratch = pool.get("gpt2.df.scratch", (CHUNK * SCRATCH,), np.uint64)
            rt.drv.memset_d32_async(_addr(scratch), 0, 2 * tokens * SCRATCH, stream)
        ptrs += [_addr(seen if sample and s.repetition_penalty != 1 else None), _addr(scratch),
                 s.seed if sample else 0]
        ints = [C, H, L, gpu.V, cap, tokens, pad, int(logits is not None), int(sample), int(row),
                (s.top_k or 0) if sample else 0]
        floats = [cfg.layer_norm_epsilon, math.log2(math.e) / math.sqrt(HEAD_DIM),
                  s.temperature if sample else 0.0, s.repetition_penalty if sample else 1.0,
                  (s.top_p or 1.0) if sample else 1.0]
        packed = pack_args(ptrs, ints, 1, floats)
        kernel = self.kernel
        if sample and s.temperature > 0:
            if self._sampler is None:
                self._sampler = self._load({**self.defines, "DF_SAMPLER": 1})
            kernel = self._sampler
        # stamps start at 1 each launch: the words go back to stamp 0 first
        rt.drv.memset_d32_async(_addr(words), 0, 2 * WORDS, stream)
        kernel((self.grid, 1, 1), (THREADS, 1, 1), packed, stream=stream, shared=self.smem)  # by value


ARG_LAYOUT = (17, 11, 5)          # DFArgs (the kernel's by-value argument): pointers and the seed, ints, (epoch),
                                  # floats


def pack_args(ptrs: list, ints: list, epoch: int, floats: list) -> bytes:
    """DFArgs's bytes, field by field as the compiler lays it out (padded to its 8-byte alignment): ptrs are its
    8-byte fields (the pointers, then the seed)."""
    if (len(ptrs), len(ints), len(floats)) != ARG_LAYOUT:
        raise ValueError(f"DFArgs takes {ARG_LAYOUT} pointers, ints, floats; got {(len(ptrs), len(ints), len(floats))}")
    head = (np.array(ptrs, np.uint64).tobytes() + np.array(ints, np.int32).tobytes()
            + np.array([epoch], np.uint32).tobytes() + np.array(floats, np.float32).tobytes())
    return head + bytes(-len(head) % 8)
