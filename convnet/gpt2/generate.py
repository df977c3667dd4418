"""GPT-2 text generation on the numpy reference: a KV cache, sampling, and the tokenizer.

prefill runs the prompt once and keeps every layer's keys and values; each decode_step then
computes only the newest position, attending over the cache instead of recomputing the
prefix. Both run model.transformer, so the block math is the full forward's.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import DataError, UsageError
from .model import GPT2Config, softmax, transformer


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


def sample(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """One token id from logits (vocab_size,): the argmax at temperature 0, else a draw from
    softmax(logits / temperature) restricted to the top_k largest."""
    if temperature == 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < z.size:
        kth = np.partition(z, -top_k)[-top_k]
        z = np.where(z < kth, -np.inf, z)
    return int(rng.choice(z.size, p=softmax(z)))


def generate(params: dict, config: GPT2Config, prompt_ids, max_new_tokens: int,
             temperature: float = 0.0, top_k: int | None = None, seed: int = 0,
             on_token: Callable[[int], None] | None = None) -> list[int]:
    """Continues prompt_ids by max_new_tokens tokens, calling on_token(id) as each one comes
    (for streaming); returns the new ids. Greedy at temperature 0, else seeded sampling."""
    prompt = np.asarray(prompt_ids)
    if prompt.ndim != 1 or prompt.size == 0:
        raise UsageError("the prompt must be a non-empty sequence of token ids")
    if max_new_tokens < 0:
        raise UsageError(f"max_new_tokens must be at least 0, got {max_new_tokens}")
    if prompt.size + max_new_tokens > config.n_ctx:
        raise UsageError(f"{prompt.size} prompt tokens + {max_new_tokens} new tokens exceed the "
                         f"model's context of {config.n_ctx}")
    if not temperature >= 0:                        # written so that NaN fails too
        raise UsageError(f"temperature must be at least 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise UsageError(f"top_k must be at least 1, got {top_k}")
    rng = np.random.default_rng(seed)
    logits, cache = prefill(params, config, prompt[None])
    new = []
    for n in range(max_new_tokens):
        if n:
            logits, cache = decode_step(params, config, cache, new[-1])
        new.append(sample(logits[0], temperature, top_k, rng))
        if on_token is not None:
            on_token(new[-1])
    return new


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
