"""GPT-2 decode steps as one persistent kernel (kernels/decode_mega.cu; variant param decode = "mega").

One cooperative launch runs `tokens` greedy steps of B <= 8 sequences: every layer, the LM head and the choice,
blocks pulling their weights through a shared-memory ring ahead of the data they wait for (the kernel file's
header says how). In logits mode (tokens = 1) it stops at the logits for sampling.cu's samplers. The prompt
(prefill) runs on the variant's other kernels and fills the KV cache this kernel reads and extends.

The kernel's shape limits are checked here, in one line each, before anything is compiled or launched
(`model_refusal`, `batch_refusal`)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import UsageError
from ..gpu.bf16 import to_bf16
from ..gpu.runtime import cdiv

KERNEL_FILE = "decode_mega.cu"
CONSUMERS = 256                   # consumer threads (decode_mega.cu's MK_CONSUMERS); one producer warp besides
SLOTS, SLOT_BYTES = 4, 40960      # the ring (decode_mega.cu's MK_SLOTS, MK_SLOT_BYTES)
CMAX, MAX_B, KEYS, PARTS = 1600, 8, 256, 1024
SPLIT_KEYS = 64                   # keys an attention item takes where the partials allow (fewer round trips a split)
HEAD_DIM = 64
MAX_FC_ROWS = 64                  # an MLP item's hidden units at most (the kernel's sh.u)
BIAS_ROWS = 256                   # bias rows of a block's items in one stage at most (MK_BIAS)
BATCH_BUILDS = (1, 2, 4, 8)       # decode_mega_b{NB}: B rounded up to one of these
CHUNK = 32                        # greedy tokens a launch (the host streams them a launch at a time)


def model_refusal(config, arch: str) -> str | None:
    """Why the megakernel cannot run this model on this GPU, or None."""
    C, H = config.n_embd, config.n_head
    if arch != "sm_90a":
        return f"the decode megakernel needs a Hopper GPU (sm_90: bulk copies, mbarriers); this one is {arch}"
    if C % H or C // H != HEAD_DIM:
        return f"the decode megakernel takes head size {HEAD_DIM}; n_embd {C} / n_head {H} is not"
    if C > CMAX or C % 8:
        return f"the decode megakernel takes n_embd a multiple of 8 up to {CMAX}; got {C}"
    return None


def batch_refusal(B: int) -> str | None:
    if not 1 <= B <= MAX_B:
        return f"the decode megakernel runs 1 to {MAX_B} sequences; got {B}"
    return None


def _rows(N: int, K: int, G: int, cap: int | None = None) -> int:
    """Rows a tile of an N x K bf16 weight: at most one ring slot (and `cap`), the tiles dealt in as few rounds of
    the grid as that allows and as even as they can be."""
    most = max(1, SLOT_BYTES // (2 * K))
    if cap:
        most = min(most, cap)
    rounds = cdiv(N, G * most)
    return max(1, cdiv(N, G * rounds))


class DecodeMegakernel:
    """The decode megakernel of one GPT2GPU (bf16 weights): weight table, launch arguments, launches."""

    batch_refusal = staticmethod(batch_refusal)

    def __init__(self, gpu, params: dict):
        from ..gpu import tma
        from ..gpu.runtime import Runtime
        rt, cfg = gpu.rt, gpu.cfg
        why = model_refusal(cfg, rt.arch)
        if why:
            raise UsageError(f"variant {gpu.variant.name}: {why}")
        self.gpu, self.rt = gpu, rt
        defines = {k: v for k, v in gpu.variant.defines.items() if k.startswith("MK_")}
        self.kernels = {}
        for nb in BATCH_BUILDS:
            name = f"decode_mega_b{nb}"
            k = rt.kernel(KERNEL_FILE, name, defines, gpu.variant.name)
            if isinstance(rt, Runtime):
                from ..gpu import build
                k = tma.CooperativeKernel(build.kernel_cubin(KERNEL_FILE, defines, name, rt.arch), name,
                                          gpu.variant.name)
            self.kernels[nb] = k
        self.smem = self._shared_bytes(rt, defines)
        self.threads = int(defines.get("MK_CONSUMERS", CONSUMERS)) + 32
        self.grid = rt.sm_count
        if isinstance(rt, Runtime):
            for k in self.kernels.values():
                k.allow_shared(self.smem)
            if self.kernels[MAX_B].max_blocks_per_sm(self.threads, self.smem) < 1:
                raise UsageError(f"the decode megakernel's block ({self.threads} threads, {self.smem} bytes of shared "
                                 f"memory) does not fit an SM of {rt.name}")
        L = cfg.n_layer
        pool, w = rt.pool, gpu.w
        # W_mlp_proj in-major ((4C, C), as the checkpoint holds it): an MLP item's rows of it are one contiguous tile
        self.wp_in = [pool.upload(f"gpt2.w.h.{i}.mlp.c_proj.in_major",
                                  to_bf16(params[f"h.{i}.mlp.c_proj.weight"]), np.uint16) for i in range(L)]
        table = np.zeros((L, 10), np.uint64)
        for i in range(L):
            h = f"h.{i}."
            table[i] = [_addr(w[h + "attn.c_attn.weight"]), _addr(w[h + "attn.c_proj.weight"]),
                        _addr(w[h + "mlp.c_fc.weight"]), _addr(self.wp_in[i]), _addr(w[h + "attn.c_attn.bias"]),
                        _addr(w[h + "attn.c_proj.bias"]), _addr(w[h + "mlp.c_fc.bias"]),
                        _addr(w[h + "mlp.c_proj.bias"]), _addr(w[h + "ln_1.pair"]), _addr(w[h + "ln_2.pair"])]
        self.table = pool.upload("gpt2.w.mega_layers", table, np.uint64)
        self._args = {}                 # packed arguments -> their copy on the device

    @staticmethod
    def _shared_bytes(rt, defines) -> int:
        """The dynamic shared memory a block takes: the build's own figure (mk_smem_bytes) on a GPU, the default
        build's size in a dry run."""
        from ..gpu.runtime import Runtime
        if isinstance(rt, Runtime):
            g, _ = rt.module(KERNEL_FILE, defines).get_global("mk_smem_bytes")
            out = np.zeros(1, np.uint64)
            rt.drv.memcpy_dtoh(out, g)
            return int(out[0])
        slots = int(defines.get("MK_SLOTS", SLOTS))
        return 1024 + slots * int(defines.get("MK_SLOT_BYTES", SLOT_BYTES)) + MAX_B * CMAX * 2 + 23 * 1024

    # -- one launch ----------------------------------------------------------------------------------------------
    def splits(self, B: int, cap: int) -> tuple[int, int]:
        """Key splits of the attention items and keys a split: SPLIT_KEYS keys an item where the partials' room
        (PARTS) allows, at most KEYS."""
        H = self.gpu.H
        S = min(cdiv(cap, SPLIT_KEYS), max(1, PARTS // (B * H)))
        kps = cdiv(cap, S)
        if kps > KEYS:
            raise UsageError(f"the decode megakernel's attention takes at most {KEYS * S} positions at batch {B}; "
                             f"the cache holds {cap}")
        return S, kps

    def launch(self, B: int, cap: int, tokens: int, out=None, logits=None, done=None, step=None, pad: int = -1,
               stream=None, trace=None):
        """Enqueues `tokens` greedy steps (out: (tokens, B) int32 device buffer) or, with logits ((B, Vp) fp32),
        one step's logits (trace: a build with MK_TRACE=1 stamps its stages there). The steps read and advance the
        decode state GPT2GPU keeps: gpt2.act.step_idx (tokens), gpt2.act.pos, the KV cache of capacity cap; done /
        step (sampling.cu's flags and counter) where given. The caller keeps pos + tokens within cap (the position
        lives on the device; GPT2GPU.generate and GPUGenerator size cap as prompt + new tokens). Each distinct argument
        block (buffer addresses, shape) is uploaded once and kept."""
        refuse_launch(batch_refusal(B), tokens, logits, "the decode megakernel")
        gpu, rt = self.gpu, self.rt
        cfg, C, H, L, G = gpu.cfg, gpu.C, gpu.H, gpu.cfg.n_layer, self.grid
        pool = rt.pool
        S, kps = self.splits(B, cap)
        lo = np.uint16
        bufs = {"kc": pool.get("gpt2.act.kcache", (L, B, H, cap, HEAD_DIM), lo),
                "vc": pool.get("gpt2.act.vcache", (L, B, H, cap, HEAD_DIM), lo),
                "x": pool.get("gpt2.mk.x", (2, B, C)), "q": pool.get("gpt2.mk.q", (B, C), lo),
                "part": pool.get("gpt2.mk.part", (B * H * S, HEAD_DIM + 4)),
                "count": pool.get("gpt2.mk.count", (2 + 4 * L,), np.uint32),
                "cand_v": pool.get("gpt2.mk.cand_v", (G, MAX_B)),
                "cand_i": pool.get("gpt2.mk.cand_i", (G, MAX_B), np.int32),
                "idx": pool.get("gpt2.act.step_idx", (B, 1), np.int32),
                "pos": pool.get("gpt2.act.pos", (1,), np.int32)}
        nb = next(n for n in BATCH_BUILDS if n >= B)
        r_head = _rows(gpu.V, C, G)
        rows = [(3 * C, _rows(3 * C, C, G)), (C, _rows(C, C, G)), (4 * C, _rows(4 * C, C, G, MAX_FC_ROWS))]
        if any(cdiv(cdiv(N, r), G) * r > BIAS_ROWS for N, r in rows):      # (not at GPT-2's widths and SM counts)
            raise UsageError(f"the decode megakernel's tiles at n_embd {C} on {G} SMs exceed {BIAS_ROWS} bias rows "
                             "a block")
        ptrs = [_addr(a) for a in (self.table, gpu.w["lm_head"], gpu.w["ln_f.pair"], gpu.w["wpe"], bufs["kc"],
                                   bufs["vc"], bufs["x"], bufs["q"], bufs["part"], bufs["count"], bufs["cand_v"],
                                   bufs["cand_i"], logits, bufs["idx"], bufs["pos"], step, done, out)]
        ints = [B, C, H, L, gpu.V, gpu.Vp, cap, S, kps, tokens, pad, int(logits is not None),
                rows[0][1], rows[1][1], rows[2][1], r_head]
        floats = [cfg.layer_norm_epsilon, math.log2(math.e) / math.sqrt(HEAD_DIM)]
        packed = pack_args(ptrs, ints, floats, _addr(trace))
        args = device_args(pool, self._args, "gpt2.mk.args", packed)
        rt.drv.memset_d32_async(_addr(bufs["count"]), 0, 2 + 4 * L, stream)
        self.kernels[nb]((G, 1, 1), (self.threads, 1, 1), np.uintp(_addr(args)), stream=stream, shared=self.smem)


ARG_LAYOUT = (18, 16, 2, 1)       # decode_mega.cu's MKArgs: pointers, ints, floats, then the trace pointer


def pack_args(ptrs: list, ints: list, floats: list, trace: int) -> bytes:
    """MKArgs's bytes, field by field in its order, as the compiler lays it out (pointers first, then 4-byte fields,
    then padding to the trace pointer's 8-byte alignment)."""
    if (len(ptrs), len(ints), len(floats), 1) != ARG_LAYOUT:
        raise ValueError(f"MKArgs takes {ARG_LAYOUT} pointers, ints, floats, trace; got "
                         f"{(len(ptrs), len(ints), len(floats), 1)}")
    head = (np.array(ptrs, np.uint64).tobytes() + np.array(ints, np.int32).tobytes()
            + np.array(floats, np.float32).tobytes())
    head += bytes(-len(head) % 8)                 # the trace pointer's 8-byte alignment
    return head + np.array([trace], np.uint64).tobytes()


def refuse_launch(batch_why: str | None, tokens: int, logits, kernel: str) -> None:
    """A persistent decode kernel's launch refused in one line: its batch refusal, or logits asked for more than
    one step."""
    if batch_why:
        raise UsageError(batch_why)
    if logits is not None and tokens != 1:
        raise UsageError(f"{kernel} writes logits for one step a launch")


def device_args(pool, kept: dict, prefix: str, packed: bytes):
    """The device copy of a persistent kernel's argument block: each distinct block (kept: packed bytes -> buffer)
    uploaded once, into pool buffer prefix + its number."""
    args = kept.get(packed)
    if args is None:
        args = pool.get(f"{prefix}{len(kept)}", (len(packed),), np.uint8)
        args.set(np.frombuffer(packed, np.uint8))
        kept[packed] = args
    return args


def _addr(buf) -> int:
    """A device buffer's address (0 for None and for the dry run's stand-ins)."""
    return 0 if buf is None else int(getattr(buf, "gpudata", 0) or 0)
