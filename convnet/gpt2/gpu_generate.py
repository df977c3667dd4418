"""Text generation on the GPU: GPT2GPU's prefill and KV-cache decode steps with the next token chosen on the
device (kernels/sampling.cu), several prompts in one batch, end-of-text per sequence.

A decode step (forward of each sequence's newest token, the choice, the advance) reads its inputs from device
memory only, so steps after the first replay captured CUDA graphs (CHAIN steps a graph, then one step a graph for
the rest), kept for the next run of the same batch, capacity and sampling (which then replays them from its first
step); the host only copies the steps' token ids back and decides, a chain behind the device, whether every sequence
has finished.

Prompts of different lengths (variants with flash attention) run as one batch: right-padded to the longest,
T tokens. The prefill's causal mask already keeps a prompt from its padding; each prompt's first new token
comes from its own last row (gather_rows), and decode steps write every sequence's keys and values at the
shared slot T + n while its position is len_b + n (embed_ragged), attention skipping its padding slots
len_b..T-1 (decode_attention_gap; the bf16 variants, session 25: embed_ragged_bf16 and decode_attention_bf16_gap,
at the head sizes decode_attention_bf16 builds for). Other variants run one batch per prompt length.

Top-p without top-k (SplitTopP) runs over several blocks per sequence (sample_prep, sample_top_p: a histogram of
each slice's mass by distance below the maximum, the exact radix select over the one boundary bin's tokens); every
other setting runs sample_tokens, one block per sequence. Both give the same kept set and the same draw.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import GPUError, UsageError
from ..gpu import tma
from ..gpu.runtime import cdiv, f32, i32, ptr
from .flash import decode_bf16_builds
from .generate import Sampling

SAMPLE_THREADS = 1024
TP_SLICE = 4096                   # tokens per block of the split top-p (sample_prep, sample_top_p)
TP_SLICES, TP_BINS = 64, 1024     # most slices per row, distance bins: as kernels/sampling.cu defaults them
MARGIN_BYTES = 256 << 20          # split-K workspaces, the allocator's rounding, the CUDA graph


class Ragged:
    """The per-sequence pieces of a batch of prompts of different lengths (GPT2GPU.ragged during a run)."""

    def __init__(self, gpu, lens: list[int], T: int):
        rt, d, name = gpu.rt, dict(gpu.variant.defines), gpu.variant.name
        bf16 = getattr(gpu, "bf16", False)      # bf16 table (the LM head's rows) and KV cache; fp32 decode rows
        self.embed_k = rt.kernel("sampling.cu", "embed_ragged_bf16" if bf16 else "embed_ragged", d, name)
        self.gather_k = rt.kernel("sampling.cu", "gather_rows", d, name)
        self.attn_k = (tma.launcher(rt, "attention.cu", "decode_attention_bf16_gap", {**d, "HEAD_DIM": gpu.D}, name)
                       if bf16 else rt.kernel("attention.cu", "decode_attention_gap", {**d, "HEAD_DIM": gpu.D}, name))
        B = len(lens)
        self.gap = rt.pool.get("gpt2.gen.gap", (B, 2), np.int32)
        self.gap.set(np.array([[n, T] for n in lens], np.int32))
        self.last = rt.pool.get("gpt2.gen.last_rows", (B,), np.int32)
        self.last.set(np.array([b * T + n - 1 for b, n in enumerate(lens)], np.int32))
        self.scale = f32(math.log2(math.e) / math.sqrt(gpu.D))

    def embed(self, idx, wte, wpe, x, B, C, pos_dev, s):
        self.embed_k((cdiv(B * C, 256), 1, 1), (256, 1, 1), idx, wte, wpe, x, i32(B), i32(C), ptr(pos_dev),
                     self.gap, stream=s)

    def gather(self, x, rows, out, B, C, s):
        self.gather_k((cdiv(B * C, 256), 1, 1), (256, 1, 1), x, rows, out, i32(B), i32(C), stream=s)
        return out

    def attention(self, q, kc, vc, y, B, H, Tk, cap, window, pos_dev, s):
        self.attn_k((B * H, 1, 1), (128, 1, 1), q, kc, vc, y, i32(H), i32(Tk), i32(1), i32(cap), i32(window),
                    self.scale, ptr(pos_dev), self.gap, stream=s)


class SplitTopP:
    """Top-p without top-k over ceil(V / slice) blocks per sequence (sampling.cu: sample_prep writes z and each
    slice's maximum, sample_top_p the slices' mass histograms, then the row's last block chooses the token)."""

    def __init__(self, rt, defines: dict, name: str, V: int):
        d = {**defines, "SM_THREADS": SAMPLE_THREADS}          # sample_tokens' build: the same module
        self.prep = rt.kernel("sampling.cu", "sample_prep", d, name)
        self.top_p = rt.kernel("sampling.cu", "sample_top_p", d, name)
        self.rt, self.V = rt, V
        self.slice = max(TP_SLICE, cdiv(V, TP_SLICES))
        self.G = cdiv(V, self.slice)

    @staticmethod
    def applies(s: Sampling) -> bool:
        return s.temperature > 0 and not s.top_k and s.top_p is not None and s.top_p < 1

    def buffers(self, B: int):
        """Per-run buffers for B sequences: slice maxima, slice histograms, the rows' tickets (zeroed here; each
        launch leaves them zero)."""
        pool = self.rt.pool
        self.part = pool.get("gpt2.gen.tp_max", (B, self.G))
        self.hist = pool.get("gpt2.gen.tp_hist", (B, self.G, TP_BINS), np.uint64)
        self.tickets = pool.get("gpt2.gen.tp_tickets", (B,), np.uint32)
        self.tickets.set(np.zeros(B, np.uint32))

    def __call__(self, logits, ld: int, zbuf, seen, words: int, done, step, row_ids, s: Sampling, pad: int, out,
                 B: int, stream=None, thresholds=None):
        grid, block = (self.G, B, 1), (SAMPLE_THREADS, 1, 1)
        self.prep(grid, block, logits, np.int64(ld), i32(self.V), i32(self.slice), zbuf, ptr(seen), i32(words),
                  ptr(done), f32(s.temperature), f32(s.repetition_penalty), self.part, stream=stream)
        self.top_p(grid, block, zbuf, i32(self.V), i32(self.slice), self.part, self.hist, self.tickets, ptr(done),
                   step, row_ids, np.uint64(s.seed), f32(s.top_p), i32(pad), out, ptr(thresholds), stream=stream)


def kernel_limits(config) -> str | None:
    """Why the GPU kernels cannot run this model shape, or None: flash and decode attention take head sizes that
    are multiples of 16 up to 128 (registers: a decode thread keeps a head's output row); the warp LayerNorm
    n_embd a multiple of 4 up to 4096 (32 lanes x 32 floats)."""
    C, H = config.n_embd, config.n_head
    D = C // H
    if D % 16 or D > 128:
        return f"head size {D} (n_embd {C} / n_head {H}): the attention kernels take multiples of 16 up to 128"
    if C % 4 or C > 4096:
        return f"n_embd {C}: the LayerNorm and GEMV kernels take multiples of 4 up to 4096"
    return None


def z_shared_bytes(rt, V: int) -> int:
    """Dynamic shared memory for sample_tokens' z row (V floats) where it fits beside the kernel's own ~3 KB,
    else 0 (z goes to device memory)."""
    device = getattr(rt, "device", None)
    if device is None:
        return 4 * V if 4 * V <= 200_000 else 0                     # dry run: as an H100 would
    limit = device.get_attribute(rt.drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    return 4 * V if 4 * V + 4096 <= limit else 0


PICK_MAX_B = 1        # greedy steps of up to this many sequences take the LM head's pick (decode_pick)
# Steps on the device (the host has nothing to add to them) replay CHAIN to a CUDA graph, each step's tokens into its
# row of a device ring, fetched once a graph: between graphs the device idled about 14 us a step (the replay's start
# and the copy of the tokens), inside one the steps follow each other as the kernels of a step do. A run that ends
# (end-of-text everywhere, a stop string) within a chain leaves at most CHAIN - 1 steps computed and not used.
CHAIN = 8


class GPUGenerator:
    """Generation on one GPT2GPU: run(prompts, ...) is the GPU backend of generate.generate_batch's contract."""

    def __init__(self, gpu, split_top_p: bool = True):
        """split_top_p: top-p without top-k on SplitTopP (False: sample_tokens for every setting)."""
        self.gpu = gpu
        rt, d, name = gpu.rt, dict(gpu.variant.defines), gpu.variant.name
        self.sample_k = rt.kernel("sampling.cu", "sample_tokens", {**d, "SM_THREADS": SAMPLE_THREADS}, name)
        self.advance_k = rt.kernel("sampling.cu", "advance_tokens", d, name)
        self.z_smem = z_shared_bytes(rt, gpu.V)
        if self.z_smem:
            self.sample_k.allow_shared(self.z_smem)
        self.split = SplitTopP(rt, d, name, gpu.V) if split_top_p else None
        # bf16 (session 25): where decode_attention_bf16 builds (HEAD_DIM / 8 a power of two), the ragged batch's
        # kernels are its _gap twin and embed_ragged_bf16; other head sizes run one batch per length
        self.ragged_ok = (gpu.graphable and not gpu.window
                          and (not getattr(gpu, "bf16", False) or decode_bf16_builds(gpu.D)))
        self.last_rate = float("nan")
        # (key, pool generation, Graph): the decode step the last run captured, replayed from the first step of the
        # next run with the same key (batch, capacity, sampling, buffers): the eager step and the capture it saves
        # are two of a short generate call's three host-launched forwards
        self._step_graph = None
        # CHAIN steps as one graph, kept as the step's is
        self._chain_graph = None
        # the prompt's forward and first choice as a graph too, captured when a run's prompt key (its step key and
        # prompt length) repeats the previous run's, replayed by the runs after it with that key: a new shape costs
        # no capture, a benchmark's or a server's repeated shape no host launches (~5 ms at the 124M shape)
        self._prompt_graph, self._last_prompt_key = None, None
        self._host = None                 # pinned (steps x batch) token ids, kept while large enough

    # -- memory ----------------------------------------------------------------------------------------
    def bytes_needed(self, B: int, T: int, N: int) -> int:
        """Device memory a batch of B prompts of up to T tokens + N new tokens needs beyond the weights."""
        g, C, H, L, V = self.gpu, self.gpu.C, self.gpu.H, self.gpu.cfg.n_layer, self.gpu.V
        cap = T + N
        per_seq = 2 * L * cap * C                                  # the KV cache
        per_seq += T * (6 * C + 4 * C + (0 if g.head_major else 3 * C))   # prefill activations
        per_seq += g.Vp + V + cdiv(V, 32) + 8                       # logits, z, seen, state
        per_seq += 2 * TP_BINS * cdiv(V, TP_SLICE) + cdiv(V, TP_SLICE)  # split top-p: histograms, maxima
        if not g.flash:
            per_seq += H * T * cap + H * T * g.D                      # naive attention's scores
        return 4 * B * per_seq + MARGIN_BYTES

    def check_fits(self, B: int, T: int, N: int):
        rt = self.gpu.rt
        if not hasattr(rt.drv, "mem_get_info"):
            return                                                  # dry run
        free, _ = rt.drv.mem_get_info()
        reusable = sum(rt.pool.view(n).nbytes for n in rt.pool.names("gpt2.act.") + rt.pool.names("gpt2.gen."))
        avail = free + reusable
        need = self.bytes_needed(B, T, N)
        if need > avail:
            per = (self.bytes_needed(2, T, N) - self.bytes_needed(1, T, N))
            most = max(0, (avail - self.bytes_needed(0, T, N)) // per)
            raise UsageError(f"{B} sequences of up to {T} prompt + {N} new tokens need {need / 2**30:.2f} GiB of "
                             f"device memory; {avail / 2**30:.2f} GiB is free on {rt.name}: at most {most} "
                             "such sequences fit (or fewer tokens)")

    # -- one batch -------------------------------------------------------------------------------------
    def run(self, prompts: list, max_new_tokens: int, s: Sampling, eos_id: int | None, rows: list[int], on_step,
            graph: bool = True, lookahead: int = 2) -> None:
        """Continues each prompt by up to max_new_tokens tokens; on_step(rows, tokens) gets each step's tokens
        (a finished sequence gets eos_id again) and returns True when all those rows are finished. Prompts of
        different lengths run as one batch where the variant allows (see the module doc), else per length."""
        lens = {len(p) for p in prompts}
        if len(lens) == 1 or self.ragged_ok:
            groups = [list(range(len(prompts)))]
        else:
            by_len: dict[int, list[int]] = {}
            for i, p in enumerate(prompts):
                by_len.setdefault(len(p), []).append(i)
            groups = list(by_len.values())
        for g in groups:
            self._run([prompts[i] for i in g], max_new_tokens, s, eos_id, [rows[i] for i in g], on_step, graph,
                      lookahead)

    def _run(self, prompts, N, s: Sampling, eos_id, rows, on_step, graph, lookahead):
        gpu, rt = self.gpu, self.gpu.rt
        pool, st, V = rt.pool, gpu.stream, gpu.V
        lens = [len(p) for p in prompts]
        B, T = len(prompts), max(lens)
        cap = T + N
        if cap > gpu.cfg.n_ctx:
            raise UsageError(f"{T} prompt tokens + {N} new tokens exceed the model's context of {gpu.cfg.n_ctx}")
        self.check_fits(B, T, N)
        idx = np.array([p + [p[-1]] * (T - len(p)) for p in prompts], np.int32)   # right-padded
        idx = gpu.check_tokens(idx)
        words = cdiv(V, 32)
        seen = None
        if s.repetition_penalty != 1:
            host_seen = np.zeros((B, words * 32), bool)
            for b, p in enumerate(prompts):
                host_seen[b, p] = True
            seen = pool.get("gpt2.gen.seen", (B, words), np.uint32)
            seen.set(np.packbits(host_seen, axis=1, bitorder="little").view(np.uint32).reshape(B, words))
        done = None
        if eos_id is not None:
            done = pool.get("gpt2.gen.done", (B,), np.int32)
            done.set(np.zeros(B, np.int32))
        step = pool.get("gpt2.gen.step", (1,), np.int32)
        step.set(np.zeros(1, np.int32))
        row_ids = pool.get("gpt2.gen.rows", (B,), np.int32)
        row_ids.set(np.array(rows, np.int32))
        zbuf = pool.get("gpt2.gen.z", (B, V))
        nxt = pool.get("gpt2.act.next", (B,), np.int32)
        pos = pool.get("gpt2.act.pos", (1,), np.int32)
        step_idx = pool.get("gpt2.act.step_idx", (B, 1), np.int32)
        pad = -1 if eos_id is None else eos_id
        temp = s.temperature
        gpu.unordered_sums = temp == 0          # sampled runs keep ordered sums: a seed gives the same text each run
        split = self.split if self.split is not None and SplitTopP.applies(s) else None
        if split is not None:
            split.buffers(B)

        def choose(logits, out=None):                   # the tokens into out (default gpt2.act.next), then advance
            out = nxt if out is None else out
            if split is not None:
                split(logits, gpu.Vp, zbuf, seen, words, done, step, row_ids, s, pad, out, B, st)
            else:
                self.sample_k((B, 1, 1), (SAMPLE_THREADS, 1, 1), logits, np.int64(gpu.Vp), i32(V), zbuf, ptr(seen),
                              i32(words), ptr(done), step, row_ids, np.uint64(s.seed), f32(temp),
                              f32(s.repetition_penalty), i32(s.top_k or 0), f32(s.top_p or 1.0), i32(pad), ptr(out),
                              np.uintp(0), i32(self.z_smem > 0), stream=st, shared=self.z_smem)
            self.advance_k((cdiv(B, 128), 1, 1), (128, 1, 1), ptr(out), step_idx, pos, step, ptr(done), ptr(seen),
                           i32(words), i32(pad), i32(B), stream=st)

        ragged = len(set(lens)) > 1
        mega = gpu.mega_takes(B, ragged)           # decode = "mega": the steps on the persistent kernel
        # its steps a launch at a time: greedy, or any sampling where the kernel samples itself (the dataflow
        # kernel: sample_tokens' choice inside it); else a launch a step to the logits, then the samplers
        plain_greedy = temp == 0 and s.repetition_penalty == 1
        mega_runs = mega and (plain_greedy or getattr(gpu.mega, "samples", False))

        gpu.ragged = Ragged(gpu, lens, T) if ragged else None
        # plain greedy steps of one sequence end in the LM head's own pick (decode_pick: argmax, advance and the
        # next embedding in its GEMV) in place of sample_tokens, advance_tokens and the embedding: the same tokens,
        # three launches fewer (H200, fast_bf16: 124M B=1 +1.2 %; B=8 -1.1 %, so not past PICK_MAX_B; xl even)
        pick = not mega and B <= PICK_MAX_B and plain_greedy and done is None and \
            gpu.graphable and gpu._picks(B)

        def device_step(out=None):                      # out: where the step's tokens go (default gpt2.act.next)
            if pick:
                gpu.enqueue(None, cap=cap, last_only=True, device_step=B, pick=True, pick_out=out)
                return
            if mega:                                # its logits, then the samplers as for the other steps
                logits = pool.get("gpt2.act.logits", (B, gpu.Vp))
                gpu.mega.launch(B, cap, 1, logits=logits, stream=st)
            else:
                logits, _ = gpu.enqueue(None, cap=cap, last_only=True, device_step=B)
            choose(logits, out)

        # what a captured step's launches bake in besides pool buffers (their addresses: the pool's generation)
        step_key = (B, cap, s, pad, split is not None, seen is not None, done is not None, ragged)

        def prompt():                                    # its tokens already in gpt2.act.idx (outside any graph)
            logits, _ = gpu.enqueue((B, T), pos=0, cap=cap, last_only=True,
                                    last_rows=gpu.ragged.last if ragged else None)
            choose(logits)
            if pick:                                     # the first step's input (then each LM head's)
                gpu._embed(step_idx, pool.get("gpt2.act.x", (B, gpu.C)), B, 1, 0, pos, st)

        try:
            host = self._host_tokens(N, B)
            events = [rt.event() for _ in range(N)]
            start, end = rt.event(), rt.event()
            p0 = np.array([T - 1], np.int32)                  # advance_tokens makes it T
            pos.set_async(p0, stream=st)
            pool.get("gpt2.act.idx", (B, T), np.int32).set_async(idx, stream=st)
            self._launch_prompt(prompt, step_key + (T,), graph and gpu.graphable)
            nxt.get_async(stream=st, ary=host[0])
            events[0].record(st)
            if mega_runs:
                self._run_mega(N, B, cap, host, events, rows, on_step, done, step, pad, start, end,
                               sampling=None if plain_greedy else s, seen=seen)
                return
            if mega:                                    # (cooperative launches stay out of captured graphs)
                graph = False
            on_device = gpu.graphable
            step_graph, processed, launched, timed_from = None, 0, 1, 2 if on_device and graph else 1
            chained = on_device and graph and N - 2 >= CHAIN
            ring = pool.get("gpt2.gen.ring", (CHAIN, B), np.int32) if chained else None
            chain_graph = None
            finished = False
            n = 1
            while n < N:
                if not on_device:                               # the host feeds each step's tokens
                    lookahead = 0
                    events[n - 1].synchronize()
                # steps the device has (nearly) finished; a chain's steps all end with it, so the host waits for the
                # chain before the one in flight, not for that one (the device would idle while the host launches)
                while processed <= n - 1 - lookahead - (CHAIN if chained else 0):
                    finished = self._process(events, host, processed, rows, on_step)
                    processed += 1
                    if finished:
                        break
                if finished:
                    break
                k = CHAIN if chained and n >= 2 and N - n >= CHAIN else 1
                if k > 1 and chain_graph is None:
                    chain_graph = self._kept(self._chain_graph, step_key)
                    if chain_graph is None:                     # captured before the timing starts
                        def chain_steps():
                            for j in range(CHAIN):
                                device_step(ptr(ring, j * B))
                        chain_graph, self._chain_graph = self._capture(step_key, chain_steps)
                if n == timed_from:
                    start.record(st)
                if k > 1:
                    chain_graph.launch()
                    ring.get_async(stream=st, ary=host[n:n + k])
                    events[n + k - 1].record(st)
                    events[n:n + k - 1] = [events[n + k - 1]] * (k - 1)
                    n += k
                    launched = n
                    continue
                if step_graph is None and on_device and graph:
                    step_graph = self._kept(self._step_graph, step_key)
                if step_graph is not None:
                    step_graph.launch()
                elif on_device:
                    device_step()
                    if graph:                                   # buffers exist now: capture the next steps
                        step_graph, self._step_graph = self._capture(step_key, device_step)
                else:
                    logits, _ = gpu.enqueue(host[n - 1].reshape(B, 1), pos=T + n - 1, cap=cap, last_only=True)
                    choose(logits)
                nxt.get_async(stream=st, ary=host[n])
                events[n].record(st)
                launched = n = n + 1
            end.record(st)
            while not finished and processed < launched:
                finished = self._process(events, host, processed, rows, on_step)
                processed += 1
            end.synchronize()
            steps = launched - timed_from
            self.last_rate = B * steps / (end.time_since(start) / 1e3) if steps > 0 else float("nan")
            rt.synchronize(f"GPT-2 generation (variant {gpu.variant.name})")
        finally:
            gpu.ragged = None

    def _run_mega(self, N, B, cap, host, events, rows, on_step, done, step, pad, start, end, sampling=None,
                  seen=None):
        """Steps 1..N-1 on the persistent decode kernel, CHUNK tokens a launch, greedy or (sampling, seen: the
        dataflow kernel) sampled inside it; the host hands each launch's tokens to on_step while the next launch
        runs, and launches no more once on_step says every row is finished."""
        from .megakernel import CHUNK
        gpu, rt = self.gpu, self.gpu.rt
        st = gpu.stream
        out = rt.pool.get("gpt2.mk.out", (N, B), np.int32)
        start.record(st)
        launched, newest, processed, finished = 1, 1, 0, False
        while True:
            if launched < N and not finished:
                k = min(CHUNK, N - launched)
                more = {} if sampling is None else {"sampling": sampling, "seen": seen, "row": rows[0]}
                gpu.mega.launch(B, cap, k, out=out[launched:launched + k], done=done, step=step, pad=pad, stream=st,
                                **more)
                out[launched:launched + k].get_async(stream=st, ary=host[launched:launched + k])
                ev = rt.event()
                ev.record(st)
                events[launched:launched + k] = [ev] * k
                newest, launched = launched, launched + k
            target = launched if launched >= N or finished else newest    # all but the launch in flight
            while processed < target and not finished:
                finished = self._process(events, host, processed, rows, on_step)
                processed += 1
            if finished or processed >= N:
                break
        end.record(st)
        end.synchronize()
        self.last_rate = B * (launched - 1) / (end.time_since(start) / 1e3) if launched > 1 else float("nan")
        rt.synchronize(f"GPT-2 generation (variant {gpu.variant.name}, decode megakernel)")

    def forget(self):
        """Drops what runs keep for the next (the decode step's, the chain's and the prompt's graphs, the pinned token
        rows): the next run captures anew, as a first call of its shape does."""
        self._step_graph = self._chain_graph = self._prompt_graph = self._last_prompt_key = self._host = None

    def _host_tokens(self, N: int, B: int):
        """Pinned host rows for N steps' B token ids: the last run's buffer where it is large enough (pinning costs
        ~1 ms a run)."""
        if self._host is None or self._host.size < N * B:
            self._host = self.gpu.rt.pinned((N * B,), np.int32)
        return self._host[:N * B].reshape(N, B)

    def _launch_prompt(self, prompt, key, graph: bool):
        """prompt() on the stream: replayed from the kept graph where it was captured with this key in this pool
        generation; launched, and captured for the next run when the previous run had the same key."""
        kept = self._kept(self._prompt_graph, key) if graph else None
        if kept is not None:
            kept.launch()
            return
        prompt()
        if not graph:
            return
        if key == self._last_prompt_key:
            try:                                     # records only: the launch above computed this run's prompt
                _, self._prompt_graph = self._capture(key, prompt)
            except (GPUError, self.gpu.rt.drv.Error):    # a prompt that cannot be captured: it stays eager
                self._prompt_graph = None
        self._last_prompt_key = key

    def _capture(self, key, fill):
        """fill()'s launches on the stream captured as a Graph (recorded, not run), and its entry for _kept: (key,
        pool generation, Graph), or None where fill allocated in the pool while capturing."""
        from ..gpu.graph import Graph
        pool = self.gpu.rt.pool
        generation, g = pool.generation, Graph.capture(self.gpu.stream)
        with g:
            fill()
        return g, ((key, generation, g) if pool.generation == generation else None)

    def _kept(self, kept, key):
        """The Graph of a kept (key, pool generation, Graph) where it fits this run: the same key, and no pool
        allocation came or went since it was captured (its launches hold the buffers' addresses); else None."""
        if kept is not None and kept[:2] == (key, self.gpu.rt.pool.generation):
            return kept[2]
        return None

    @staticmethod
    def _process(events, host, n, rows, on_step) -> bool:
        events[n].synchronize()
        return bool(on_step(rows, host[n].copy()))
