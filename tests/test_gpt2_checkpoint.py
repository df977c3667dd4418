"""GPT-2 checkpoint loaders: the Hugging Face directory, llm.c's .bin, and their error messages."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from convnet.errors import DataError, WeightsError
from convnet.gpt2 import checkpoint as ckpt
from convnet.gpt2 import model as gpt2
from convnet.gpu.bf16 import round_bf16, to_bf16
from helpers import rel_err

FIXTURE = Path(__file__).parent / "fixtures" / "gpt2_tiny"
# vocab 50 is padded to 128 in llm.c files; n_head 2 tells n_head and n_embd apart in the header.
TINY = gpt2.GPT2Config(n_layer=3, n_head=2, n_embd=16, vocab_size=50, n_ctx=12)


def expect_error(error, path, match, load, *args):
    """load(*args) raises error matching match, in one line that names path."""
    with pytest.raises(error, match=match) as info:
        load(*args)
    message = str(info.value)
    assert "\n" not in message and str(path) in message, message


# --- Hugging Face ---------------------------------------------------------------------------

@pytest.fixture
def st():
    return pytest.importorskip("safetensors.numpy")


@pytest.fixture
def fixture_tensors(st):
    return st.load_file(FIXTURE / "model.safetensors")


def write_hf(directory, st, tensors):
    """A Hugging Face directory with the fixture's config.json and these tensors."""
    directory.mkdir()
    shutil.copy(FIXTURE / "config.json", directory)
    st.save_file(tensors, directory / "model.safetensors")
    return directory


def test_load_hf_fixture(st):
    params, config = ckpt.load_hf(FIXTURE)
    assert config == gpt2.GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=257, n_ctx=64)
    assert set(params) == set(gpt2.param_shapes(config))
    assert params["h.0.attn.c_attn.weight"].shape == (64, 192)      # Conv1D (in, out), as stored


def test_load_hf_without_prefix_skips_buffers_and_tied_head(tmp_path, st, fixture_tensors):
    tensors = {k.removeprefix("transformer."): v for k, v in fixture_tensors.items()}
    tril = np.tril(np.ones((64, 64), np.float32))[None, None]
    tensors.update({"h.0.attn.bias": tril, "h.1.attn.bias": tril,
                    "h.0.attn.masked_bias": np.array(-1e4, np.float32),
                    "lm_head.weight": tensors["wte.weight"]})
    params, config = ckpt.load_hf(write_hf(tmp_path / "gpt2", st, tensors))
    expected, _ = ckpt.load_hf(FIXTURE)
    assert set(params) == set(expected)
    for name in expected:
        np.testing.assert_array_equal(params[name], expected[name])


def test_load_hf_rejects_untied_head(tmp_path, st, fixture_tensors):
    tensors = dict(fixture_tensors, **{"lm_head.weight": fixture_tensors["transformer.wte.weight"] + 1})
    path = write_hf(tmp_path / "gpt2", st, tensors) / "model.safetensors"
    expect_error(WeightsError, path, "untied", ckpt.load_hf, path.parent)


def fixture_config():
    return json.loads((FIXTURE / "config.json").read_text())


@pytest.mark.parametrize("config,error,match", [
    ("{ not json", DataError, "not a readable JSON"),
    ({k: v for k, v in fixture_config().items() if k != "n_embd"},
     DataError, "missing or non-integer n_embd"),
    (dict(fixture_config(), n_head=5), DataError, "not a multiple of n_head"),
    (dict(fixture_config(), activation_function="relu"), WeightsError, "activation_function='relu'"),
], ids=["json", "missing-key", "n_head", "activation"])
def test_load_hf_bad_config(tmp_path, config, error, match):
    directory = tmp_path / "gpt2"
    shutil.copytree(FIXTURE, directory)
    path = directory / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    expect_error(error, path, match, ckpt.load_hf, directory)


def test_load_hf_missing_files(tmp_path):
    missing = tmp_path / "none"
    expect_error(DataError, missing / "config.json", "not found", ckpt.load_hf, missing)
    directory = tmp_path / "gpt2"
    directory.mkdir()
    shutil.copy(FIXTURE / "config.json", directory)
    expect_error(DataError, directory / "model.safetensors", "not found", ckpt.load_hf, directory)


@pytest.mark.parametrize("change,match", [
    (lambda t: t.pop("transformer.h.1.mlp.c_fc.bias"), "missing h.1.mlp.c_fc.bias"),
    (lambda t: t.update({"transformer.h.0.attn.c_proj.weight": np.zeros((64, 63), np.float32)}),
     r"h.0.attn.c_proj.weight has shape \(64, 63\), expected \(64, 64\)"),
    (lambda t: t.update({"transformer.ln_f.bias": np.zeros(64, np.int32)}),
     "ln_f.bias has dtype int32"),
], ids=["missing", "shape", "dtype"])
def test_load_hf_says_which_tensor_is_wrong(tmp_path, st, fixture_tensors, change, match):
    tensors = dict(fixture_tensors)
    change(tensors)
    path = write_hf(tmp_path / "gpt2", st, tensors) / "model.safetensors"
    expect_error(WeightsError, path, match, ckpt.load_hf, path.parent)


@pytest.mark.parametrize("keep", [0, 5, 100, -8])
def test_load_hf_truncated_safetensors(tmp_path, st, keep):
    directory = tmp_path / "gpt2"
    shutil.copytree(FIXTURE, directory)
    path = directory / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    expect_error(DataError, path, "truncated or corrupt", ckpt.load_hf, directory)


def write_safetensors(path, tensors, metadata=None):
    """A safetensors file written by hand: {name: (dtype string, array of the stored bytes' type)}."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))
    return path


@pytest.mark.parametrize("dtype", ["BF16", "F16"])
def test_load_hf_half_precision_checkpoint(tmp_path, st, fixture_tensors, dtype):
    """A checkpoint saved in bfloat16 or float16 loads, each value widened exactly to float32."""
    if dtype == "BF16":
        stored = {k: ("BF16", to_bf16(v)) for k, v in fixture_tensors.items()}
        widened = {k: round_bf16(v) for k, v in fixture_tensors.items()}
    else:
        stored = {k: ("F16", v.astype(np.float16)) for k, v in fixture_tensors.items()}
        widened = {k: v.astype(np.float16).astype(np.float32) for k, v in fixture_tensors.items()}
    half = tmp_path / "half"
    half.mkdir()
    shutil.copy(FIXTURE / "config.json", half)
    write_safetensors(half / "model.safetensors", stored, metadata={"format": "pt"})
    params, config = ckpt.load_hf(half)
    expected, _ = ckpt.load_hf(write_hf(tmp_path / "widened", st, widened))
    full, _ = ckpt.load_hf(FIXTURE)
    assert set(params) == set(full)
    for name in full:
        assert params[name].dtype == np.float32 and params[name].flags.writeable, name
        np.testing.assert_array_equal(params[name], expected[name])
        assert rel_err(params[name], full[name]) < (4e-3 if dtype == "BF16" else 5e-4), name


def test_reader_agrees_with_the_safetensors_package(st, fixture_tensors):
    from convnet.gpt2.safetensors_reader import read_safetensors
    ours = read_safetensors(FIXTURE / "model.safetensors")
    assert set(ours) == set(fixture_tensors)
    for name, arr in fixture_tensors.items():
        assert ours[name].dtype == arr.dtype
        np.testing.assert_array_equal(ours[name], arr)


@pytest.mark.parametrize("tensors,match", [
    ({"x": ("F8_E4M3", np.zeros(4, np.uint8))}, "tensor x is stored as F8_E4M3, which this loader does not read"),
    ({"x": ("F32", np.zeros(4, np.uint8))}, "tensor x: bytes 0..4 for 4 x F32"),
], ids=["dtype", "size"])
def test_reader_refuses_bad_tensors(tmp_path, tensors, match):
    from convnet.gpt2.safetensors_reader import read_safetensors
    path = write_safetensors(tmp_path / "bad.safetensors", tensors)
    expect_error(DataError, path, match, read_safetensors, path)


@pytest.mark.parametrize("data,match", [
    (b"\x05\0\0\0\0\0\0\0{bad}", "header"),
    (b"\x02\0\0\0\0\0\0\0[]", "not a JSON object"),
    (b"\xff\xff\0\0\0\0\0\0{}", "header in a"),
    (len(b := b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}}').to_bytes(8, "little") + b + bytes(8),
     "bad header entry"),
], ids=["json", "array", "length", "entry"])
def test_reader_refuses_corrupt_headers(tmp_path, data, match):
    from convnet.gpt2.safetensors_reader import read_safetensors
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    expect_error(DataError, path, match, read_safetensors, path)


# --- llm.c ----------------------------------------------------------------------------------

def test_llmc_round_trip_is_exact(tmp_path, rng):
    params = gpt2.random_params(TINY, seed=5)
    path = tmp_path / "tiny.bin"
    ckpt.save_llmc(params, TINY, path)
    loaded, config = ckpt.load_llmc(path)
    assert config == TINY
    assert set(loaded) == set(params)
    for name in params:
        np.testing.assert_array_equal(loaded[name], params[name])
    idx = rng.integers(0, TINY.vocab_size, size=(2, TINY.n_ctx))
    np.testing.assert_array_equal(gpt2.forward(loaded, config, idx), gpt2.forward(params, TINY, idx))


def test_llmc_bfloat16_file_loads_widened(tmp_path, rng):
    """llm.c's version 5 (gpt2_124M_bf16.bin): the float32 file's layout with 2-byte bfloat16 params."""
    params = gpt2.random_params(TINY, seed=6)
    ckpt.save_llmc(params, TINY, tmp_path / "f32.bin")
    data = (tmp_path / "f32.bin").read_bytes()
    header = np.frombuffer(data[:1024], "<i4").copy()
    header[1] = 5
    body = np.frombuffer(data[1024:], "<f4")
    (tmp_path / "bf16.bin").write_bytes(header.tobytes() + to_bf16(body).tobytes())
    loaded, config = ckpt.load_llmc(tmp_path / "bf16.bin")
    assert config == TINY and set(loaded) == set(params)
    for name in params:
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], round_bf16(params[name]))
    idx = rng.integers(0, TINY.vocab_size, size=(2, TINY.n_ctx))
    assert rel_err(gpt2.forward(loaded, config, idx), gpt2.forward(params, TINY, idx)) < 2e-2
    short = tmp_path / "short.bin"
    short.write_bytes((tmp_path / "bf16.bin").read_bytes()[:-2])
    expect_error(DataError, short, "truncated", ckpt.load_llmc, short)


def test_llmc_file_has_llmc_layout(tmp_path):
    """Reads the written file at llm.c's offsets, independently of load_llmc."""
    params = gpt2.random_params(TINY, seed=6)
    path = tmp_path / "tiny.bin"
    ckpt.save_llmc(params, TINY, path)
    raw = path.read_bytes()
    L, C, V, Vp, maxT = 3, 16, 50, 128, 12
    np.testing.assert_array_equal(np.frombuffer(raw[:32], "<i4"), [20240326, 3, maxT, V, L, 2, C, Vp])
    assert not np.frombuffer(raw[32:1024], "<i4").any()
    data = np.frombuffer(raw[1024:], "<f4")
    assert data.size == Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    wte = data[:Vp * C].reshape(Vp, C)
    np.testing.assert_array_equal(wte[:V], params["wte"])
    assert not wte[V:].any()
    qkvw = Vp * C + maxT * C + 2 * L * C                     # after wte, wpe, ln1w, ln1b
    layer1 = data[qkvw + 3 * C * C:qkvw + 6 * C * C].reshape(3 * C, C)
    np.testing.assert_array_equal(layer1, params["h.1.attn.c_attn.weight"].T)   # (out, in)
    np.testing.assert_array_equal(data[-C:], params["ln_f.bias"])


def test_llmc_round_trip_of_transformers_fixture(tmp_path, st):
    params, config = ckpt.load_hf(FIXTURE)
    ckpt.save_llmc(params, config, tmp_path / "gpt2.bin")
    loaded, loaded_config = ckpt.load_llmc(tmp_path / "gpt2.bin")
    tokens, expected = np.load(FIXTURE / "tokens.npy"), np.load(FIXTURE / "expected_logits.npy")
    logits = gpt2.forward(loaded, loaded_config, tokens)
    np.testing.assert_array_equal(logits, gpt2.forward(params, config, tokens))
    assert rel_err(logits, expected) <= 1e-5


@pytest.fixture
def llmc_bytes(tmp_path):
    ckpt.save_llmc(gpt2.random_params(TINY, seed=7), TINY, tmp_path / "good.bin")
    return bytearray((tmp_path / "good.bin").read_bytes())


def header_int(data, index, value):
    data[4 * index:4 * index + 4] = np.int32(value).tobytes()
    return data


@pytest.mark.parametrize("change,match", [
    (lambda d: header_int(d, 0, 20240327), "wrong magic 20240327, expected 20240326"),
    (lambda d: header_int(d, 1, 4), "version 4 is not supported"),
    (lambda d: header_int(d, 1, 5), "has trailing bytes"),          # a float32 body under the bfloat16 version
    (lambda d: d[:1000], "truncated, 1000 bytes is shorter than the 1024-byte llm.c header"),
    (lambda d: d[:-4], "truncated"),
    (lambda d: d + b"\0" * 4, "trailing bytes"),
    (lambda d: header_int(d, 5, 3), "bad llm.c header"),
    (lambda d: header_int(d, 7, 49), "padded vocab 49 < vocab 50"),
], ids=["magic", "version", "bf16-version-f32-body", "short-header", "short-params", "trailing", "n_head", "padded-vocab"])
def test_load_llmc_bad_files(tmp_path, llmc_bytes, change, match):
    path = tmp_path / "bad.bin"
    path.write_bytes(bytes(change(llmc_bytes)))
    expect_error(DataError, path, match, ckpt.load_llmc, path)


def test_load_llmc_missing_file(tmp_path):
    expect_error(DataError, tmp_path / "none.bin", "not found", ckpt.load_llmc, tmp_path / "none.bin")


def test_save_llmc_checks_params(tmp_path):
    params = gpt2.random_params(TINY, seed=8)
    del params["wpe"]
    with pytest.raises(WeightsError, match="missing wpe"):
        ckpt.save_llmc(params, TINY, tmp_path / "x.bin")
    assert not (tmp_path / "x.bin").exists()
