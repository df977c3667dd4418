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
    ([1], 1, {"temperature": -0.1}, "temperature must be 0 \\(greedy\\) or lie in"),
    ([1], 1, {"temperature": float("nan")}, "temperature must be 0 \\(greedy\\) or lie in"),
    ([1], 1, {"temperature": float("inf")}, "temperature must be 0 \\(greedy\\) or lie in"),
    ([1], 1, {"top_k": 3}, "temperature 0 is greedy"),
    ([1], 1, {"temperature": 1.0, "top_p": 0.0}, "top_p must lie in \\(0, 1\\]"),
    ([1], 1, {"temperature": 1.0, "repetition_penalty": 0.0}, "repetition_penalty must lie in"),
    ([1], 1, {"seed": -1}, "seed must lie"),
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
    p = run_cli("--checkpoint", str(FIXTURE), "--tokens", ",".join(map(str, prompt)), "--variant", "cpu",
                "--max-new-tokens", "12", "--temperature", "1.5", "--top-k", "20", "--seed", "7", "--ignore-eos")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    expected = generate(params, config, prompt, 12, temperature=1.5, top_k=20, seed=7)
    assert [int(t) for t in p.stdout.split()] == expected


def test_cli_default_variant_says_which(hf_tiny):
    p = run_cli("--checkpoint", str(FIXTURE), "--tokens", "1,2", "--max-new-tokens", "3")
    assert p.returncode == 0
    assert "variant cpu" in p.stderr or p.stderr == "", p.stderr     # 'auto' without a GPU: the note


def byte_checkpoint(tmp_path):
    checkpoint = write_byte_vocab(tmp_path)
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(FIXTURE / name, checkpoint)
    return checkpoint


def text_of(tok, ids, eos=256):
    return tok.decode(ids[:-1] if ids and ids[-1] == eos else ids)


def test_cli_prompt_through_tokenizer(hf_tiny, tmp_path):
    pytest.importorskip("tokenizers")
    params, config, _ = hf_tiny
    checkpoint = byte_checkpoint(tmp_path)
    p = run_cli("--checkpoint", str(checkpoint), "--prompt", "héllo", "--max-new-tokens", "10", "--variant", "cpu")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    tok = load_tokenizer(checkpoint)
    ids = generate(params, config, tok.encode("héllo"), 10, eos_id=256)
    assert p.stdout == text_of(tok, ids) + "\n"


def test_stream_holds_back_split_characters_and_stop_prefixes(tmp_path):
    pytest.importorskip("tokenizers")
    from convnet.gpt2.generate import Completion, _Watch
    tok = load_tokenizer(write_byte_vocab(tmp_path))
    shown = []
    w = _Watch(Completion(0, 0, [1]), tok, ["XY"], 256, 100, shown.append)
    for token in "aé".encode():                     # é is 2 bytes, so 2 tokens
        w.add(token)
    assert "".join(shown) == "a"                    # é incomplete; 'é' could still start... no: held one char
    for token in "bX".encode():
        w.add(token)
    assert "".join(shown) == "aéb"                  # 'X' may start the stop string
    assert w.add(ord("Y"))                          # the stop string: finished, not shown
    assert "".join(shown) == "aéb" and w.c.finish_reason == "stop" and w.c.text == "aéb"


def test_cli_several_prompts_samples_stdin_and_json(hf_tiny, tmp_path, tmp_path_factory):
    pytest.importorskip("tokenizers")
    params, config, _ = hf_tiny
    checkpoint = byte_checkpoint(tmp_path)
    tok = load_tokenizer(checkpoint)
    (tmp_path / "prompts.txt").write_text("one\n\ntwo three\n")
    out = tmp_path_factory.mktemp("results") / "out.json"     # not inside the checkpoint's folder: that is refused
    args = ["--checkpoint", str(checkpoint), "--prompt", "héllo", "--prompts-file", str(tmp_path / "prompts.txt"),
            "--tokens", "7,8,9", "--num-samples", "2", "--temperature", "0.9", "--top-p", "0.8", "--seed", "3",
            "--max-new-tokens", "9", "--variant", "cpu", "--json", str(out)]
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    prompts = [tok.encode(t) for t in ("héllo", "one", "two three")] + [[7, 8, 9]]
    assert [(c["prompt_index"], c["sample"]) for c in doc["completions"]] == [(i, j) for i in range(4) for j in range(2)]
    for row, c in enumerate(doc["completions"]):        # each as if generated alone, with its row's draws
        assert c["prompt_ids"] == prompts[c["prompt_index"]]
        want = generate(params, config, c["prompt_ids"], 9, temperature=0.9, top_p=0.8, seed=3, eos_id=256, row=row)
        assert c["ids"] == want
        assert c["finish_reason"] == ("eos" if want[-1] == 256 else "length")
        assert c["text"] == text_of(tok, want)
    assert doc["variant"] == "cpu" and doc["tokens_per_s"] > 0 and doc["new_tokens"] == sum(
        len(c["ids"]) for c in doc["completions"])
    assert p.stdout.count("=== prompt") == 8            # each printed when done
    again = subprocess.run([sys.executable, "-m", "convnet.gpt2", "generate", *args[:2], "--prompts-file", "-",
                            *args[8:]], input="one\ntwo three\n", capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert again.returncode == 0, again.stderr
    again_doc = json.loads(out.read_text())["completions"]
    assert [c["prompt_ids"] for c in again_doc] == [prompts[1]] * 2 + [prompts[2]] * 2
    for row, c in enumerate(again_doc):                 # rows number this run's sequences
        assert c["ids"] == generate(params, config, c["prompt_ids"], 9, temperature=0.9, top_p=0.8, seed=3,
                                    eos_id=256, row=row)


def test_cli_stop_string_and_same_seed_same_text(hf_tiny, tmp_path):
    pytest.importorskip("tokenizers")
    checkpoint = byte_checkpoint(tmp_path)
    common = ["--checkpoint", str(checkpoint), "--prompt", "abc", "--variant", "cpu", "--max-new-tokens", "30",
              "--temperature", "1.2", "--seed", "9", "--ignore-eos"]
    free = run_cli(*common)
    assert free.returncode == 0 and run_cli(*common).stdout == free.stdout
    text = free.stdout[:-1]
    stop = text[5:7]
    assert stop and run_cli(*common, "--seed", "10").stdout != free.stdout
    cut = run_cli(*common, "--stop", stop)
    assert cut.returncode == 0 and cut.stdout == text[:text.index(stop)] + "\n"


def test_generate_batch_stops_each_sequence_at_eos(small):
    from convnet.gpt2.generate import Sampling, run_generation, generate_batch
    params, config = small
    prompts = [[1, 2], [3, 4], [5]]
    free = [generate(params, config, p, 6) for p in prompts]
    eos = free[0][2]

    def backend(*a):
        return generate_batch(params, config, *a)
    done, stats = run_generation(backend, prompts, 6, Sampling(), eos)
    for c, f in zip(done, free):
        want = f[:f.index(eos) + 1] if eos in f else f
        assert c.ids == want and c.finish_reason == ("eos" if eos in f else "length")
    assert stats["new_tokens"] == sum(len(c.ids) for c in done)


def test_kept_set_top_k_ties_and_nucleus_by_brute_force(rng):
    from convnet.gpt2.generate import fixed_weights, kept
    z = rng.standard_normal(200).astype(np.float32)
    z[:5] = z.max() + 1                                  # a 5-way tie at the top
    assert kept(z, 3, None).sum() == 5                  # ties with the k-th are kept
    w = fixed_weights(z).astype(np.float64)
    for p in (0.05, 0.3, 0.9, 0.999):
        mask = kept(z, None, p)
        for i in range(z.size):                         # kept iff the mass strictly above it is short of p
            above = w[z > z[i]].sum()
            assert mask[i] == (above < np.ceil(p * w.sum())), (p, i)


def test_uniform_is_a_counter_based_hash():
    from convnet.gpt2.generate import uniform
    u = [uniform(1, r, s) for r in range(50) for s in range(50)]
    assert all(0 <= x < 1 for x in u) and len(set(u)) == len(u)
    assert uniform(1, 2, 3) == uniform(1, 2, 3) != uniform(2, 2, 3)
    assert 0.45 < np.mean(u) < 0.55


def test_sampling_kernels_compile_without_spills():
    from convnet.gpu import build
    if build.nvcc_path() is None:
        pytest.skip("nvcc not installed")
    from test_kernels_compile import spills
    for defines in ({}, {"USE_RESTRICT": 1}):
        _, log = build.compile_cubin("sampling.cu", defines, "sm_90a")
        found = spills(log)
        assert {"sample_tokens", "advance_tokens", "embed_ragged", "gather_rows"} <= set(found)
        assert not any(found.values()), found
    _, log = build.compile_cubin("attention.cu", {"HEAD_DIM": 64, "USE_RESTRICT": 1}, "sm_90a")
    assert spills(log)["decode_attention_gap"] == 0


def hub_cache(tmp_path, repo="models--user--tiny", files=("config.json", "generation_config.json", "model.safetensors")):
    """A Hugging Face cache as huggingface_hub lays it out: refs/main names a snapshot of blobs (symlinks)."""
    root = tmp_path / "hub"
    snap = root / repo / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (root / repo / "blobs").mkdir()
    for name in files:
        blob = root / repo / "blobs" / name.replace(".", "_")
        shutil.copy(FIXTURE / name, blob)
        (snap / name).symlink_to(blob)
    (root / repo / "refs").mkdir()
    (root / repo / "refs" / "main").write_text("0123abcd")
    return root


def run_cli_env(env, *args):
    import os
    return subprocess.run([sys.executable, "-m", "convnet.gpt2", "generate", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, env={**os.environ, **env})


def test_hub_name_resolves_from_the_cache_offline(tmp_path):
    pytest.importorskip("safetensors")
    root = hub_cache(tmp_path)
    env = {"HF_HUB_CACHE": str(root), "HF_HUB_OFFLINE": "1"}
    by_name = run_cli_env(env, "--checkpoint", "user/tiny", "--tokens", "1,2,3", "--variant", "cpu")
    by_dir = run_cli("--checkpoint", str(FIXTURE), "--tokens", "1,2,3", "--variant", "cpu")
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout == by_dir.stdout
    from convnet.gpt2 import checkpoint
    import os
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert checkpoint.resolve_checkpoint("user/tiny") == root / "models--user--tiny" / "snapshots" / "0123abcd"
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def test_hub_name_missing_says_what_and_how_to_fetch(tmp_path):
    root = hub_cache(tmp_path, "models--user--half", files=("config.json",))
    env = {"HF_HUB_CACHE": str(root), "HF_HUB_OFFLINE": "1"}
    for name, missing in (("gpt2", "models--gpt2/refs/main"), ("user/half", "model.safetensors")):
        p = run_cli_env(env, "--checkpoint", name, "--tokens", "1", "--variant", "cpu")
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert missing in p.stderr and "HF_HUB_OFFLINE=1" in p.stderr and f"hf download {name}" in p.stderr


def test_version():
    p = subprocess.run([sys.executable, "-m", "convnet.gpt2", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.startswith("convnet-gpt2 ")


@pytest.mark.parametrize("args,message", [
    (["--checkpoint", "no/such/model.bin", "--tokens", "1,2"], "no/such/model.bin: not found"),
    (["--checkpoint", str(FIXTURE), "--prompt", "hi"], "no tokenizer"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1,x"], "comma-separated token ids"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--max-new-tokens", "64"], "context of 64"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--seed", "-1"], "--seed must be >= 0"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--temperature", "inf"], "--temperature must be 0 (greedy) or lie in"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--temperature", "nan"], "--temperature must be 0 (greedy) or lie in"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--temperature", "-1"], "--temperature must be 0 (greedy) or lie in"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--top-k", "5"], "--top-k applies to sampling"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--top-p", "0.5"], "--top-p applies to sampling"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--temperature", "1", "--top-p", "0"], "(0, 1]"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--temperature", "1", "--top-p", "1.5"], "(0, 1]"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--max-new-tokens", "0"], "at least 1"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--num-samples", "0"], "at least 1"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--stop", "x", "--variant", "cpu"], "--stop needs a tokenizer"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1,300"], "token id 300 is out of range"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--json", "/no/such/dir/out.json"], "does not exist"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--eos-id", "3", "--ignore-eos"], "contradict"),
    (["--checkpoint", str(FIXTURE)], "give a prompt"),
    (["--checkpoint", str(FIXTURE), "--tokens", "1", "--variant", "nope"], "nope"),
    (["--checkpoint", "SIX_BYTES", "--tokens", "1"], "truncated, 6 bytes"),
])
def test_cli_errors_are_one_line_and_exit_2(args, message, tmp_path):
    if str(FIXTURE) in args:
        pytest.importorskip("safetensors")
    if "SIX_BYTES" in args:
        (tmp_path / "six.bin").write_bytes(b"abcdef")
        args = [str(tmp_path / "six.bin") if a == "SIX_BYTES" else a for a in args]
    p = run_cli(*args)
    assert p.returncode == 2
    assert message in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


# --- the GPU generation loop's host side, through the dry-run runtime (no GPU) ------------------------------

class _Event:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def time_since(self, other):
        return 1.0


def dry_runtime():
    from convnet.bench.dryrun import RecordingRuntime

    class DryRun(RecordingRuntime):
        def pinned(self, shape, dtype):
            return np.zeros(shape, dtype)

        def event(self):
            return _Event()

        def synchronize(self, what):
            pass
    return DryRun()


class _Graph:
    """Graph's stand-in on the dry run: the launches inside `with` are recorded (by the runtime) and replays counted."""
    made = []

    def __init__(self, stream):
        self.launched = 0
        _Graph.made.append(self)

    @classmethod
    def capture(cls, stream):
        return cls(stream)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def launch(self):
        self.launched += 1


@pytest.mark.parametrize("name,B,N,chains,singles", [("fast_bf16", 1, 20, 2, 2), ("fast_bf16", 3, 20, 2, 2),
                                                     ("fast_fp32", 2, 9, 0, 7), ("fast_fp32", 2, 10, 1, 0)])
def test_decode_steps_chain_in_graphs_on_the_host_side(name, B, N, chains, singles, monkeypatch):
    """The generation loop with graphs on the dry run (Graph stood in for): the first step launched, then captured
    alone; where CHAIN steps remain after it, CHAIN steps captured once into the chain's graph and replayed while CHAIN
    steps remain, single steps after; every step handed to on_step once, in order; the next run of the shape launches
    no step from the host and replays the kept graphs, its first step too (it captures its prompt: _launch_prompt)."""
    from convnet import catalogue
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import CHAIN, GPUGenerator
    from convnet.gpt2.generate import Sampling
    from convnet.gpu import graph
    monkeypatch.setattr(graph, "Graph", _Graph)
    config = gpt2.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=64)
    rt = dry_runtime()
    gen = GPUGenerator(GPT2GPU(gpt2.random_params(config), config, catalogue.get(name, "gpt2"), rt))
    assert gen.gpu.graphable
    calls, enqueue = [], gen.gpu.enqueue
    monkeypatch.setattr(gen.gpu, "enqueue", lambda *a, **k: calls.append(k.get("device_step", 0)) or enqueue(*a, **k))
    prompts = [list(range(1, 6)) for _ in range(B)]
    for run in range(2):
        _Graph.made.clear()
        calls.clear()
        steps = []
        gen.run(prompts, N, Sampling(), None, list(range(B)), lambda rows, tokens: steps.append(list(rows)) and False)
        assert steps == [list(range(B))] * N
        step_calls = [c for c in calls if c]
        if run == 0:
            assert step_calls == [B] * (2 + (CHAIN if chains else 0))
            assert [g.launched for g in _Graph.made] == [singles] + ([chains] if chains else [])
            kept = [gen._step_graph[2]] + ([gen._chain_graph[2]] if chains else [])
        else:                   # replayed: no step launched or captured (the prompt is: its key repeats the first's)
            assert step_calls == [] and len(_Graph.made) == 1 and _Graph.made[0] is gen._prompt_graph[2]
            # its first step too comes from the kept step graph
            assert [g.launched for g in kept] == [2 * singles + 1] + ([2 * chains] if chains else [])


@pytest.mark.parametrize("name,lens,C", [("fast_fp32", (3, 3), 128), ("fast_fp32", (2, 5, 1), 128),
                                         ("baseline", (2, 5, 5), 128), ("fast_bf16", (3, 3), 128),
                                         ("fast_bf16", (2, 5, 1), 128), ("fast_bf16_xb", (2, 5, 1), 128),
                                         ("fast_bf16_split", (4, 1), 128), ("fast_bf16_mma", (3, 1, 3), 128),
                                         ("fast_bf16", (2, 5, 1), 192)])
def test_generation_launches_match_their_kernels(name, lens, C):
    """Every launch of prefill, sampling, advance and decode steps (prompts of one or several lengths) passes as
    many arguments as its kernel declares; ragged batches take embed_ragged, gather_rows and
    decode_attention_gap (the bf16 variants, session 25: embed_ragged_bf16 and decode_attention_bf16_gap, whatever
    their decode attention), and variants without flash attention, or bf16 ones at a head size decode_attention_bf16
    does not build for (48: C = 192), one batch per prompt length."""
    from convnet import catalogue
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.generate import Sampling
    from helpers import declared_arity
    config = gpt2.GPT2Config(n_layer=2, n_head=4, n_embd=C, vocab_size=257, n_ctx=32)
    rt = dry_runtime()
    gen = GPUGenerator(GPT2GPU(gpt2.random_params(config), config, catalogue.get(name, "gpt2"), rt))
    steps = []
    prompts = [list(range(1, n + 1)) for n in lens]
    gen.run(prompts, 4, Sampling(0.8, top_k=5, top_p=0.9, repetition_penalty=1.1, seed=1), 0,
            list(range(len(lens))), lambda rows, tokens: steps.append(list(rows)) and False, graph=False)
    arity = declared_arity()
    for kernel, grid, block, nargs in rt.launches:
        assert nargs == arity[kernel], f"{kernel}: {nargs} arguments passed, {arity[kernel]} declared"
    kernels = [k for k, *_ in rt.launches]
    bf16 = "bf16" in name
    ragged = len(set(lens)) > 1 and name != "baseline" and not (bf16 and C == 192)
    attn, embed = ("decode_attention_bf16_gap", "embed_ragged_bf16") if bf16 else ("decode_attention_gap",
                                                                                  "embed_ragged")
    assert (attn in kernels) == ragged and (embed in kernels) == ragged
    if ragged:                                           # every decode step's attention skips the padding
        others = {"decode_attention_bf16", "decode_attention_split_bf16", "decode_attention", "flash_attention_bf16"}
        assert kernels.count(attn) == config.n_layer * 3 and not others & set(kernels[kernels.index(embed):])
    assert kernels.count("gather_rows") == int(ragged)
    groups = 1 if ragged or len(set(lens)) == 1 else len(set(lens))
    assert kernels.count("sample_tokens") == kernels.count("advance_tokens") == 4 * groups
    assert len(steps) == 4 * groups and sorted({r for s in steps for r in s}) == list(range(len(lens)))
    assert gen.gpu.ragged is None                      # cleared after the run


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "sampled"])
def test_one_sequence_adds_the_heads_in_any_order_only_when_greedy(greedy):
    """fast_bf16's one-row steps run attention and projection as one kernel (decode_attn_proj: the heads' sums added
    by atomics, in any order) for greedy runs; a sampled run keeps decode_attention_bf16 and the projection's GEMV,
    so that a seed gives the same text each run. Every launch passes as many arguments as its kernel declares."""
    from convnet import catalogue
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.generate import Sampling
    from helpers import declared_arity
    config = gpt2.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=32)
    rt = dry_runtime()
    gen = GPUGenerator(GPT2GPU(gpt2.random_params(config), config, catalogue.get("fast_bf16", "gpt2"), rt))
    steps = []
    s = Sampling() if greedy else Sampling(0.8, top_k=5, seed=1)
    gen.run([[1, 2, 3, 4, 5]], 4, s, None, [0], lambda rows, tokens: steps.append(list(rows)) and False, graph=False)
    arity = declared_arity()
    for kernel, grid, block, nargs in rt.launches:
        assert nargs == arity[kernel], f"{kernel}: {nargs} arguments passed, {arity[kernel]} declared"
    kernels = [k for k, *_ in rt.launches]
    fused, plain = kernels.count("decode_attn_proj_bf16"), kernels.count("decode_attention_bf16")
    assert (fused, plain) == ((config.n_layer * 3, 0) if greedy else (0, config.n_layer * 3)), (fused, plain)
    assert len(steps) == 4


def test_kept_graph_fits_the_same_key_in_the_same_pool_generation():
    """GPUGenerator._kept (CPU: no graph launched): a kept (key, generation, graph) is replayed only for an equal key
    (batch, capacity, sampling, ...) while the pool has allocated nothing since its capture."""
    from types import SimpleNamespace
    from convnet.gpt2.generate import Sampling
    from convnet.gpt2.gpu_generate import GPUGenerator
    gen = object.__new__(GPUGenerator)
    pool = SimpleNamespace(generation=3)
    gen.gpu = SimpleNamespace(rt=SimpleNamespace(pool=pool))
    graph = object()
    key = (2, 40, Sampling(), -1, False, False, False, False)
    kept = (key, 3, graph)
    assert gen._kept(kept, key) is graph
    assert gen._kept(kept, (2, 40, Sampling(0.7, seed=3), -1, False, False, False, False)) is None
    assert gen._kept(kept, key + (12,)) is None
    assert gen._kept(None, key) is None
    pool.generation = 4                                   # an allocation since the capture
    assert gen._kept(kept, key) is None
