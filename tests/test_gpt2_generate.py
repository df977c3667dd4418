"""GPT-2 generation: the KV cache against full recompute, sampling, the tokenizer and the CLI."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from convnet.errors import DataError, UsageError
from convnet.gpt2 import model as gpt2
from convnet.gpt2.generate import decode_step, generate, load_tokenizer, prefill, sample
from convnet.paths import CHECKOUT_ROOT as ROOT
from helpers import rel_err

FIXTURE = Path(__file__).parent / "fixtures" / "gpt2_tiny"
SMALL = gpt2.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=40, n_ctx=10)


@pytest.fixture(scope="module")
def hf_tiny(gpt2_fixture):
    params, config, tokens, _ = gpt2_fixture
    return params, config, tokens


@pytest.fixture(scope="module")
def small():
    return gpt2.random_params(SMALL, seed=1), SMALL


def greedy_by_recompute(params, config, prompt, n):
    """The plain way: run the whole sequence again for every new token."""
    seq = list(prompt)
    for _ in range(n):
        seq.append(int(gpt2.forward(params, config, np.array([seq]))[0, -1].argmax()))
    return seq[len(prompt):]


def check_decode_against_forward(params, config, idx):
    """Decodes greedily to the end of the context; each step's logits match full recompute."""
    logits, cache = prefill(params, config, idx)
    assert rel_err(logits, gpt2.forward(params, config, idx)[:, -1]) <= 1e-5
    while cache.length < config.n_ctx:
        idx = np.concatenate([idx, logits.argmax(axis=-1)[:, None]], axis=1)
        logits, cache = decode_step(params, config, cache, idx[:, -1])
        assert cache.length == idx.shape[1]
        assert rel_err(logits, gpt2.forward(params, config, idx)[:, -1]) <= 1e-5, idx.shape[1]
    return idx


# --- the KV cache ---------------------------------------------------------------------------

def test_decode_matches_full_forward_on_fixture(hf_tiny):
    params, config, tokens = hf_tiny
    prompt = tokens[:1, :5]
    idx = check_decode_against_forward(params, config, prompt)
    continuation = list(idx[0, 5:])
    assert generate(params, config, prompt[0], len(continuation)) == continuation
    assert continuation[:12] == greedy_by_recompute(params, config, prompt[0], 12)


def test_decode_matches_full_forward_batched(small, rng):
    params, config = small
    idx = check_decode_against_forward(params, config, rng.integers(0, config.vocab_size, (2, 3)))
    for row in idx:                                   # each sequence as if decoded alone
        assert generate(params, config, row[:3], config.n_ctx - 3) == list(row[3:])


def test_cache_is_preallocated_and_filled_incrementally(small):
    params, config = small
    _, cache = prefill(params, config, [[1, 2, 3]])
    assert cache.k.shape == cache.v.shape == (2, 1, 2, config.n_ctx, 8)
    assert cache.length == 3
    before = cache.k.copy()
    _, same = decode_step(params, config, cache, 4)
    assert same is cache and cache.length == 4
    np.testing.assert_array_equal(cache.k[..., :3, :], before[..., :3, :])   # the prefix is kept
    assert np.any(cache.k[..., 3, :]) and not np.any(cache.k[..., 4:, :])


def test_decode_step_rejects_a_full_cache_and_wrong_tokens(small):
    params, config = small
    _, cache = prefill(params, config, [list(range(config.n_ctx))])
    with pytest.raises(UsageError, match="cache is full"):
        decode_step(params, config, cache, 0)
    _, cache = prefill(params, config, [[1], [2]])
    with pytest.raises(UsageError, match="one per sequence"):
        decode_step(params, config, cache, 0)
    with pytest.raises(UsageError, match="out of range"):
        decode_step(params, config, cache, [0, config.vocab_size])


# --- sampling -------------------------------------------------------------------------------

def test_greedy_is_deterministic_and_streams(small):
    params, config = small
    streamed = []
    first = generate(params, config, [5, 6], 8, on_token=streamed.append)
    assert streamed == first == generate(params, config, [5, 6], 8, seed=123)
    assert first == greedy_by_recompute(params, config, [5, 6], 8)


def test_seeded_sampling_is_reproducible_and_seeds_differ(small):
    params, config = small
    first = generate(params, config, [5], 9, temperature=5.0, seed=0)
    assert generate(params, config, [5], 9, temperature=5.0, seed=0) == first
    assert generate(params, config, [5], 9, temperature=5.0, seed=1) != first


def test_top_k_1_is_greedy(hf_tiny):
    params, config, tokens = hf_tiny
    prompt = tokens[1, :4]
    greedy = generate(params, config, prompt, 20)
    for seed in (0, 1):
        assert generate(params, config, prompt, 20, temperature=3.0, top_k=1, seed=seed) == greedy


def test_top_k_keeps_only_the_k_largest(rng):
    logits = rng.standard_normal(50)
    top3 = set(np.argsort(logits)[-3:])
    draws = {sample(logits, 10.0, 3, rng) for _ in range(200)}
    assert draws == top3                            # at a high temperature all 3 come up
    assert {sample(logits, 1.0, 1000, rng) for _ in range(200)} - top3     # k > vocab: no cut


@pytest.mark.parametrize("prompt,n,kwargs,match", [
    ([], 1, {}, "non-empty"),
    ([[1, 2]], 1, {}, "non-empty"),
    ([1] * 8, 3, {}, "8 prompt tokens \\+ 3 new tokens exceed the model's context of 10"),
    ([1] * 11, 0, {}, "context of 10"),
    ([1, 40], 1, {}, "token id 40 is out of range"),
    ([-1], 1, {}, "token id -1 is out of range"),
    ([1.5], 1, {}, "must be integers"),
    ([1], -1, {}, "max_new_tokens must be at least 0"),
    ([1], 1, {"temperature": -0.1}, "temperature must be at least 0"),
    ([1], 1, {"temperature": float("nan")}, "temperature must be at least 0"),
    ([1], 1, {"temperature": 1.0, "top_k": 0}, "top_k must be at least 1"),
])
def test_generate_rejects_bad_input(small, prompt, n, kwargs, match):
    params, config = small
    with pytest.raises(UsageError, match=match):
        generate(params, config, prompt, n, **kwargs)


def test_prompt_may_fill_the_context(small):
    params, config = small
    assert generate(params, config, [1] * 7, 3) == greedy_by_recompute(params, config, [1] * 7, 3)
    assert generate(params, config, [1] * 10, 0) == []


# --- tokenizer ------------------------------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's byte -> printable character table of its byte-level BPE."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    for b in range(256):
        if b not in bs:                             # unprintable bytes go to 256, 257, ...
            bs.append(b)
            cs.append(256 + len(cs) - 188)
    return dict(zip(bs, map(chr, cs)))


def write_byte_vocab(directory):
    """vocab.json + merges.txt of a byte-level BPE without merges: token id = byte value, and
    256 = <|endoftext|>, so its 257 tokens fit the fixture model."""
    table = bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    vocab["<|endoftext|>"] = 256
    (directory / "vocab.json").write_text(json.dumps(vocab))
    (directory / "merges.txt").write_text("#version: 0.2\n")
    return directory


def test_no_tokenizer_files_give_none():
    assert load_tokenizer(FIXTURE) is None


def test_vocab_and_merges_then_tokenizer_json(tmp_path):
    pytest.importorskip("tokenizers")
    text = "héllo, wörld"
    tok = load_tokenizer(write_byte_vocab(tmp_path))
    assert tok.encode(text) == list(text.encode())
    assert tok.decode(tok.encode(text)) == text
    tok._tokenizer.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "vocab.json").write_text("{ broken")        # tokenizer.json comes first
    again = load_tokenizer(tmp_path)
    assert again.encode(text) == list(text.encode()) and again.decode(again.encode(text)) == text


def test_unreadable_tokenizer_is_a_data_error(tmp_path):
    pytest.importorskip("tokenizers")
    (tmp_path / "tokenizer.json").write_text("{ not json")
    with pytest.raises(DataError, match="tokenizer.json: not a readable tokenizer"):
        load_tokenizer(tmp_path)


def test_missing_tokenizers_library_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)      # makes `import tokenizers` fail
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(DataError, match="needs the tokenizers package"):
        load_tokenizer(tmp_path)


# --- command line ---------------------------------------------------------------------------

def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "convnet.gpt2", "generate", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_cli_streams_token_ids(hf_tiny):
    params, config, tokens = hf_tiny
    prompt = [int(t) for t in tokens[0, :6]]
    p = run_cli("--checkpoint", str(FIXTURE), "--tokens", ",".join(map(str, prompt)),
                "--max-new-tokens", "12", "--temperature", "1.5", "--top-k", "20", "--seed", "7")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    expected = generate(params, config, prompt, 12, temperature=1.5, top_k=20, seed=7)
    assert [int(t) for t in p.stdout.split()] == expected


def test_cli_prompt_through_tokenizer(hf_tiny, tmp_path):
    pytest.importorskip("tokenizers")
    params, config, _ = hf_tiny
    checkpoint = write_byte_vocab(tmp_path)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(FIXTURE / name, checkpoint)
    p = run_cli("--checkpoint", str(checkpoint), "--prompt", "héllo", "--max-new-tokens", "10")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    tok = load_tokenizer(checkpoint)
    assert p.stdout == tok.decode(generate(params, config, tok.encode("héllo"), 10)) + "\n"


def test_text_stream_holds_back_a_split_character(tmp_path, capsys):
    pytest.importorskip("tokenizers")
    from convnet.gpt2.__main__ import _TextStream
    stream = _TextStream(load_tokenizer(write_byte_vocab(tmp_path)))
    for token, shown in zip("aé".encode(), ["a", "", "é"]):     # é is 2 bytes, so 2 tokens
        stream(token)
        assert capsys.readouterr().out == shown
    stream(0xC3)                                    # a character cut off at the end
    stream.flush(final=True)
    assert capsys.readouterr().out == "\ufffd"


@pytest.mark.parametrize("args,message", [
    (["--checkpoint", "no/such/model.bin", "--tokens", "1,2"], "no/such/model.bin: not found"),
    (["--checkpoint", str(FIXTURE), "--prompt", "hi"], "no tokenizer"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1,x"], "comma-separated token ids"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--max-new-tokens", "64"], "context of 64"),
])
def test_cli_errors_are_one_line_and_exit_2(args, message):
    if str(FIXTURE) in args:
        pytest.importorskip("safetensors")
    p = run_cli(*args)
    assert p.returncode == 2
    assert message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
