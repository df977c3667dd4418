"""GPT-2 text generation on the numpy reference: a KV cache, sampling, and the tokenizer.

prefill runs the prompt once and keeps every layer's keys and values; each decode_step then
computes only the newest position, attending over the cache instead of recomputing the
prefix. Both run model.transformer, so the block math is the full forward's.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import DataError, UsageError
from .model import GPT2Config, transformer


@dataclass
class KVCache:
    """Keys and values of every layer for positions 0..length-1, preallocated to n_ctx."""
    k: np.ndarray                   # (n_layer, B, n_head, n_ctx, head_size)
    v: np.ndarray
    length: int = 0


def _token_ids(config: GPT2Config, ids) -> np.ndarray:
    ids = np.asarray(ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise UsageError(f"token ids must be integers, got {ids.dtype}")
    bad = ids[(ids < 0) | (ids >= config.vocab_size)]
    if bad.size:
        raise UsageError(f"token id {bad[0]} is out of range: the model's vocabulary is "
                         f"0..{config.vocab_size - 1}")
    return ids


def prefill(params: dict, config: GPT2Config, idx, dtype=np.float32) -> tuple[np.ndarray, KVCache]:
    """Token ids (B, T) -> logits of the last position (B, vocab_size), and the cache of all T."""
    idx = np.asarray(idx)
    if idx.ndim != 2 or idx.shape[1] == 0:
        raise UsageError(f"prefill needs a non-empty (B, T) array of token ids, got shape {idx.shape}")
    idx = _token_ids(config, idx)
    B, T = idx.shape
    if T > config.n_ctx:
        raise UsageError(f"the prompt has {T} tokens, more than the model's context of {config.n_ctx}")
    shape = (config.n_layer, B, config.n_head, config.n_ctx, config.n_embd // config.n_head)
    cache = KVCache(np.zeros(shape, dtype), np.zeros(shape, dtype))
    logits = transformer(params, config, idx, dtype, (cache.k, cache.v), pos=0)
    cache.length = T
    return logits[:, -1], cache


def decode_step(params: dict, config: GPT2Config, cache: KVCache, token) -> tuple[np.ndarray, KVCache]:
    """Appends one token per sequence (an int, or B of them) at position cache.length;
    returns its logits (B, vocab_size) and the cache, updated in place."""
    B = cache.k.shape[1]
    token = _token_ids(config, token)
    if token.size != B:
        raise UsageError(f"decode_step needs {B} token(s), one per sequence, got {token.size}")
    if cache.length >= config.n_ctx:
        raise UsageError(f"the KV cache is full: all {config.n_ctx} positions of the context are used")
    logits = transformer(params, config, token.reshape(B, 1), cache.k.dtype,
                         (cache.k, cache.v), pos=cache.length)
    cache.length += 1
    return logits[:, -1], cache


# -- sampling: the oracle of kernels/sampling.cu ------------------------------------------------------

FIXED_ONE = 2 ** 40                 # the likeliest token's weight as a fixed-point integer (sampling.cu SM_FIXED)
_MASK64 = (1 << 64) - 1


# what a temperature and a repetition penalty may be: fp32 logits (|l| < 1e4) divided or multiplied by them stay finite
SCALE_RANGE = (1e-4, 1e4)


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen. temperature 0 = greedy (argmax); else a seeded draw from
    softmax(z / temperature) restricted to the top_k largest and then to the nucleus of mass top_p.
    repetition_penalty (HF's): a logit of a token already in the sequence is divided by it when positive,
    multiplied when negative, before anything else (greedy included)."""
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float = 1.0
    seed: int = 0

    def checked(self) -> "Sampling":
        t = self.temperature
        if not (isinstance(t, (int, float)) and (t == 0 or SCALE_RANGE[0] <= t <= SCALE_RANGE[1])):
            raise UsageError(f"temperature must be 0 (greedy) or lie in [{SCALE_RANGE[0]:g}, {SCALE_RANGE[1]:g}] "
                             f"(fp32 logits divided by it stay finite), got {t}")
        if self.top_k is not None and self.top_k < 1:
            raise UsageError(f"top_k must be at least 1, got {self.top_k}")
        if self.top_p is not None and not (math.isfinite(self.top_p) and 0 < self.top_p <= 1):
            raise UsageError(f"top_p must lie in (0, 1], got {self.top_p}")
        if t == 0 and (self.top_k is not None or self.top_p is not None):
            which = "top_k" if self.top_k is not None else "top_p"
            raise UsageError(f"{which} applies to sampling; temperature 0 is greedy (give a temperature > 0)")
        r = self.repetition_penalty
        if not (math.isfinite(r) and SCALE_RANGE[0] <= r <= SCALE_RANGE[1]):
            raise UsageError(f"repetition_penalty must lie in [{SCALE_RANGE[0]:g}, {SCALE_RANGE[1]:g}] (1 = none), got {r}")
        if not 0 <= self.seed < 2 ** 64:
            raise UsageError(f"seed must lie in [0, 2^64), got {self.seed}")
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def uniform(seed: int, row: int, step: int) -> float:
    """The draw's uniform in [0, 1) for sequence `row` at its `step`-th new token: a counter-based hash,
    so any order of evaluation (CPU or GPU, any batch) gives every sequence the same numbers."""
    return (_splitmix64(_splitmix64(_splitmix64(seed) ^ row) ^ step) >> 11) / 2.0 ** 53


def scaled_logits(logits, s: Sampling, seen=None) -> np.ndarray:
    """z (float32): the repetition penalty on the tokens marked in `seen` (bool (vocab,)), then / temperature."""
    z = np.asarray(logits, dtype=np.float32).copy()
    if seen is not None and s.repetition_penalty != 1:
        pen = np.float32(s.repetition_penalty)
        z[seen] = np.where(z[seen] > 0, z[seen] / pen, z[seen] * pen)
    if s.temperature > 0:
        z = z / np.float32(s.temperature)
    return z + np.float32(0)                         # -0 -> +0, as the kernel


def float_keys(z: np.ndarray) -> np.ndarray:
    """Order-preserving uint32 keys of float32 values (sampling.cu float_key)."""
    u = np.asarray(z, dtype=np.float32).view(np.uint32)
    return np.where(u & 0x80000000, ~u, u | 0x80000000).astype(np.uint32)


def fixed_weights(z: np.ndarray) -> np.ndarray:
    """exp(z - max z) as fixed-point integers, the maximum = FIXED_ONE."""
    z64 = z.astype(np.float64)
    return np.floor(np.exp(z64 - z64.max()) * FIXED_ONE).astype(np.uint64)


def kept(z: np.ndarray, top_k: int | None, top_p: float | None) -> np.ndarray:
    """The tokens a draw may pick: z >= the k-th largest z (ties kept), then z >= tau, tau the largest value
    whose mass {z >= tau} reaches top_p of the kept mass (the nucleus, ties kept)."""
    keep = np.ones(z.size, bool)
    if top_k is not None and top_k < z.size:
        keep = z >= np.partition(z, -top_k)[-top_k]
    if top_p is not None and top_p < 1:
        w = np.where(keep, fixed_weights(z), np.uint64(0))
        need = math.ceil(top_p * float(int(w.sum())))
        order = np.argsort(-z, kind="stable")
        values, starts = np.unique(-z[order], return_index=True)   # distinct values, largest first
        mass = np.add.reduceat(w[order], starts)
        tau = -values[np.argmax(np.cumsum(mass) >= max(need, 1))]
        keep &= z >= tau
    return keep


def choose(logits, s: Sampling, seen=None, row: int = 0, step: int = 0) -> int:
    """One token id from logits (vocab,): greedy or the seeded draw of sampling.cu (inverse CDF over the
    kept tokens' fixed-point weights in token order, at uniform(seed, row, step))."""
    z = scaled_logits(logits, s, seen)
    if s.greedy:
        return int(np.argmax(z))
    w = np.where(kept(z, s.top_k, s.top_p), fixed_weights(z), np.uint64(0))
    cum = np.cumsum(w)
    total = int(cum[-1])
    r = min(int(uniform(s.seed, row, step) * float(total)), total - 1)
    return int(np.searchsorted(cum, r, side="right"))


def sample(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """One token with a numpy generator's draw (kept for callers that bring their own rng)."""
    return choose(logits, Sampling(temperature, top_k if temperature else None),
                  row=int(rng.integers(0, 2 ** 62)))


def generate(params: dict, config: GPT2Config, prompt_ids, max_new_tokens: int,
             temperature: float = 0.0, top_k: int | None = None, seed: int = 0,
             on_token: Callable[[int], None] | None = None, top_p: float | None = None,
             repetition_penalty: float = 1.0, eos_id: int | None = None, row: int = 0) -> list[int]:
    """Continues prompt_ids by up to max_new_tokens tokens, calling on_token(id) as each one comes
    (for streaming); returns the new ids, ending at eos_id (included) if it comes. Greedy at
    temperature 0, else seeded sampling (the draws of sequence `row` of a batch)."""
    prompt = np.asarray(prompt_ids)
    if prompt.ndim != 1 or prompt.size == 0:
        raise UsageError("the prompt must be a non-empty sequence of token ids")
    if max_new_tokens < 0:
        raise UsageError(f"max_new_tokens must be at least 0, got {max_new_tokens}")
    if prompt.size + max_new_tokens > config.n_ctx:
        raise UsageError(f"{prompt.size} prompt tokens + {max_new_tokens} new tokens exceed the "
                         f"model's context of {config.n_ctx}")
    s = Sampling(temperature, top_k, top_p, repetition_penalty, seed).checked()
    new = []

    def step(_rows, tokens):
        new.append(int(tokens[0]))
        if on_token is not None:
            on_token(new[-1])
        return eos_id is not None and new[-1] == eos_id
    if max_new_tokens:
        generate_batch(params, config, [list(prompt)], max_new_tokens, s, eos_id, [row], step)
    return new


def generate_batch(params: dict, config: GPT2Config, prompts: list, max_new_tokens: int, s: Sampling,
                   eos_id: int | None, rows: list[int], on_step) -> None:
    """The numpy backend of batched generation: prompts of one length run as one batch (a KV cache each);
    on_step(rows, tokens) gets every step's tokens of those rows (a finished row gets eos_id again) and
    returns True when all of them are finished. Draws are those of sampling.cu for the same rows."""
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(len(p), []).append(i)
    for members in groups.values():
        idx = np.array([prompts[i] for i in members])
        group_rows = [rows[i] for i in members]
        seen = None
        if s.repetition_penalty != 1:
            seen = np.zeros((len(members), config.vocab_size), bool)
            for b, p in enumerate(idx):
                seen[b, p] = True
        done = np.zeros(len(members), bool)
        logits, cache = prefill(params, config, idx)
        tokens = None
        for n in range(max_new_tokens):
            if n:
                logits, cache = decode_step(params, config, cache, tokens)
            tokens = np.array([eos_id if done[b] else choose(logits[b], s, None if seen is None else seen[b],
                                                             group_rows[b], n) for b in range(len(members))])
            if seen is not None:
                seen[np.arange(len(members)), tokens] = True
            if eos_id is not None:
                done |= tokens == eos_id
            if on_step(group_rows, tokens):
                break


class Tokenizer:
    """A `tokenizers` tokenizer seen through plain lists of token ids."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text).ids

    def decode(self, ids) -> str:
        return self._tokenizer.decode(list(ids))


def load_tokenizer(checkpoint_dir: str | os.PathLike) -> Tokenizer | None:
    """The tokenizer beside a checkpoint: tokenizer.json, else GPT-2's byte-level BPE from
    vocab.json + merges.txt, else None (no tokenizer: token ids are used directly)."""
    directory = Path(checkpoint_dir)
    tokenizer_json, vocab, merges = (directory / n for n in ("tokenizer.json", "vocab.json", "merges.txt"))
    if tokenizer_json.is_file():
        path = tokenizer_json
    elif vocab.is_file() and merges.is_file():
        path = vocab
    else:
        return None
    try:
        import tokenizers                           # optional: only checkpoints with a tokenizer need it
    except ImportError:
        raise DataError(f"{path}: reading it needs the tokenizers package "
                        "(pip install tokenizers)") from None
    try:
        if path == tokenizer_json:
            return Tokenizer(tokenizers.Tokenizer.from_file(str(path)))
        return Tokenizer(tokenizers.ByteLevelBPETokenizer(str(vocab), str(merges)))
    except Exception as e:                          # tokenizers raises plain Exception on bad files
        raise DataError(f"{path}: not a readable tokenizer ({e})") from None


# -- the generation driver: several prompts and samples, stops, streaming (both backends) ------------------

@dataclass
class Completion:
    """One generated sequence: ids as produced (ending with the end-of-text token if it came), the text
    (without the end-of-text token, cut before a stop string) and why it ended: eos, stop or length."""
    prompt_index: int
    sample: int
    prompt_ids: list
    ids: list = field(default_factory=list)
    finish_reason: str | None = None
    text: str | None = None


class _Watch:
    """Stops and text of one completion; for the streamed one, the text that is safe to show: a trailing
    partial character (byte-level BPE tokens split them) and a possible start of a stop string wait."""

    def __init__(self, c: Completion, tokenizer, stop, eos_id, limit, on_text):
        self.c, self.tokenizer, self.stop, self.eos_id, self.limit, self.on_text = c, tokenizer, stop, eos_id, limit, on_text
        self.hold = max((len(x) for x in stop), default=1) - 1
        self.shown = 0

    def add(self, token: int) -> bool:
        c = self.c
        c.ids.append(int(token))
        if self.eos_id is not None and token == self.eos_id:
            c.finish_reason = "eos"
        if self.tokenizer is None:
            if self.on_text is not None:
                self.on_text(f"{int(token)} ")
        else:
            text = self.tokenizer.decode(c.ids[:-1] if c.finish_reason == "eos" else c.ids)
            cut = min((i for i in (text.find(x) for x in self.stop) if i >= 0), default=-1)
            if cut >= 0 and c.finish_reason is None:
                text, c.finish_reason = text[:cut], "stop"
            c.text = text
        if c.finish_reason is None and len(c.ids) >= self.limit:
            c.finish_reason = "length"
        if self.on_text is not None and self.tokenizer is not None:
            text = c.text
            end = len(text) if c.finish_reason else len(text.rstrip("\ufffd")) - self.hold
            if end > self.shown:
                self.on_text(text[self.shown:end])
                self.shown = end
        return c.finish_reason is not None


def run_generation(backend, prompts: list, max_new_tokens: int, s: Sampling, eos_id: int | None = None,
                   num_samples: int = 1, stop=(), tokenizer=None, on_text=None, on_done=None):
    """Generates num_samples continuations of every prompt (token id lists) as one batch on `backend`
    (generate_batch's contract: backend(prompts, n, sampling, eos_id, rows, on_step)). on_text(str) streams
    the only completion when there is one; on_done(completion) is called as each one ends. Returns the
    completions (prompt order, then sample order) and {"new_tokens", "seconds", "tokens_per_s"}."""
    import time
    if stop and tokenizer is None:
        raise UsageError("--stop needs a tokenizer beside the checkpoint (stop strings are text)")
    completions = [Completion(i, j, list(p)) for i, p in enumerate(prompts) for j in range(num_samples)]
    stream = on_text if len(completions) == 1 else None
    watches = [_Watch(c, tokenizer, list(stop), eos_id, max_new_tokens, stream) for c in completions]
    # where no text streams (several completions, or --json -), a long decode shows its steps on a terminal
    from tqdm import tqdm
    progress = tqdm(total=max_new_tokens, desc="generating", unit=" step", file=sys.stderr, leave=False,
                    disable=True if stream is not None else None)

    def on_step(rows, tokens) -> bool:
        progress.update(1)
        for r, t in zip(rows, tokens):
            w = watches[r]
            if w.c.finish_reason is None and w.add(t) and on_done is not None:
                on_done(w.c)
        return all(watches[r].c.finish_reason is not None for r in rows)

    t0 = time.perf_counter()
    try:
        backend([c.prompt_ids for c in completions], max_new_tokens, s, eos_id, list(range(len(completions))), on_step)
    finally:
        progress.close()
    seconds = time.perf_counter() - t0
    new = sum(len(c.ids) for c in completions)
    return completions, {"new_tokens": new, "seconds": seconds, "tokens_per_s": new / seconds if seconds else 0.0}
