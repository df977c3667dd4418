"""GPT-2 checkpoints: read a Hugging Face directory or an llm.c .bin; write the llm.c format.

Both loaders return (params, GPT2Config), params in model.py's layout: float32, every linear
weight (in, out). Hugging Face's Conv1D weights already are (in, out) and are kept as stored;
llm.c's are (out, in), like torch.nn.Linear, and are transposed on load and on save.
Half-precision checkpoints (safetensors F16 / BF16, llm.c's bfloat16 version 5) widen to float32
exactly; a bf16 variant rounds them back to the same bf16 values.

Errors name the file in one line: DataError when a file is missing, unreadable, truncated or
not of the expected format; WeightsError when it reads but its tensors or settings do not
make the GPT-2 that model.py runs.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np

from ..errors import DataError, WeightsError
from .model import GPT2Config, check_params, param_shapes
from ..gpu.bf16 import from_bf16
from .safetensors_reader import read_safetensors

LLMC_MAGIC = 20240326
LLMC_FP32 = 3                 # llm.c's model file versions: float32 params
LLMC_BF16 = 5                 # bfloat16 params (widened to float32 on load)
LLMC_HEADER_INTS = 256
LLMC_VOCAB_MULTIPLE = 128     # llm.c pads the vocab rows of wte to this for its GPU kernels

# config.json settings that change the computation, and the values model.py implements.
_HF_SUPPORTED = {
    "activation_function": ("gelu_new", "gelu_pytorch_tanh"),
    "scale_attn_weights": (True,),
    "scale_attn_by_inverse_layer_idx": (False,),
    "add_cross_attention": (False,),
}

# llm.c's per-layer tensors in file order; each is stored stacked over the layers.
_LLMC_LAYER = (
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
)


def load_hf(directory: str | os.PathLike) -> tuple[dict[str, np.ndarray], GPT2Config]:
    """Reads config.json and model.safetensors of a Hugging Face GPT-2 (GPT2Model or
    GPT2LMHeadModel: keys with or without the "transformer." prefix)."""
    directory = Path(directory)
    config = _hf_config(directory / "config.json")
    path = directory / "model.safetensors"
    tensors = read_safetensors(path)
    params, lm_head = {}, None
    for key, arr in tensors.items():
        name = key.removeprefix("transformer.")
        if name.endswith((".attn.bias", ".attn.masked_bias")):
            continue                                    # causal-mask buffers, not weights
        if name == "lm_head.weight":
            lm_head = arr
            continue
        params[{"wte.weight": "wte", "wpe.weight": "wpe"}.get(name, name)] = arr
    # model.py ties the LM head to wte; a head that differs would be silently dropped.
    if lm_head is not None and "wte" in params and not np.array_equal(lm_head, params["wte"]):
        raise WeightsError(f"{path}: lm_head.weight differs from wte; untied LM heads are not supported")
    return check_params(params, config, source=str(path)), config


def _hf_config(path: Path) -> GPT2Config:
    if not path.is_file():
        raise DataError(f"{path}: not found")
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not a readable JSON file ({e})") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: expected a JSON object")
    keys = ("n_layer", "n_head", "n_embd", "vocab_size", "n_positions")
    bad = [k for k in keys if not isinstance(raw.get(k), int)]
    if bad:
        raise DataError(f"{path}: missing or non-integer {', '.join(bad)}")
    unsupported = [f"{k}={raw[k]!r}" for k, ok in _HF_SUPPORTED.items() if k in raw and raw[k] not in ok]
    if unsupported:
        raise WeightsError(f"{path}: unsupported GPT-2 settings {', '.join(unsupported)}")
    try:
        return GPT2Config(n_layer=raw["n_layer"], n_head=raw["n_head"], n_embd=raw["n_embd"],
                          vocab_size=raw["vocab_size"], n_ctx=raw["n_positions"],
                          layer_norm_epsilon=float(raw.get("layer_norm_epsilon", 1e-5)))
    except (TypeError, ValueError) as e:
        raise DataError(f"{path}: {e}") from None


def _llmc_layout(config: GPT2Config, padded_vocab: int) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every tensor of an llm.c file, in file order, with llm.c's shapes."""
    ours = param_shapes(config)
    layout = [("wte", (padded_vocab, config.n_embd)), ("wpe", ours["wpe"])]
    # Reversing the shape turns our (in, out) weights into llm.c's (out, in); biases are 1-D.
    layout += [(name, (config.n_layer, *ours["h.0." + name][::-1])) for name in _LLMC_LAYER]
    layout += [("ln_f.weight", ours["ln_f.weight"]), ("ln_f.bias", ours["ln_f.bias"])]
    return layout


def load_llmc(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], GPT2Config]:
    """Reads llm.c's model file (gpt2_124M.bin: float32; gpt2_124M_bf16.bin: bfloat16, widened):
    a header of 256 int32, the params."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: not found")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw = f.read(4 * LLMC_HEADER_INTS)
            header = np.frombuffer(raw[:len(raw) // 4 * 4], dtype="<i4")     # a short file: whole ints only
            if header.size < LLMC_HEADER_INTS:
                raise DataError(f"{path}: truncated, {size} bytes is shorter than the "
                                f"{4 * LLMC_HEADER_INTS}-byte llm.c header")
            magic, version, max_t, vocab, n_layer, n_head, n_embd, padded_vocab = map(int, header[:8])
            if magic != LLMC_MAGIC:
                raise DataError(f"{path}: wrong magic {magic}, expected {LLMC_MAGIC} "
                                "(not an llm.c GPT-2 model file)")
            if version not in (LLMC_FP32, LLMC_BF16):
                raise DataError(f"{path}: llm.c model version {version} is not supported, only "
                                f"version {LLMC_FP32} (float32) and {LLMC_BF16} (bfloat16)")
            width = 4 if version == LLMC_FP32 else 2
            try:
                config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                                    vocab_size=vocab, n_ctx=max_t)
            except ValueError as e:
                raise DataError(f"{path}: bad llm.c header: {e}") from None
            if padded_vocab < vocab:
                raise DataError(f"{path}: bad llm.c header: padded vocab {padded_vocab} < vocab {vocab}")
            layout = _llmc_layout(config, padded_vocab)
            count = sum(math.prod(shape) for _, shape in layout)
            expected = 4 * LLMC_HEADER_INTS + width * count
            if size != expected:
                what = "truncated" if size < expected else "has trailing bytes"
                raise DataError(f"{path}: {what}, {size} bytes where the header announces {expected}")
            data = np.fromfile(f, dtype="<f4" if width == 4 else "<u2", count=count)
    except OSError as e:
        raise DataError(f"{path}: cannot be read ({e.strerror or e})") from None

    if width == 2:
        data = from_bf16(data)
    params, offset = {}, 0
    for name, shape in layout:
        arr = data[offset:offset + math.prod(shape)].reshape(shape)
        offset += arr.size
        if name in _LLMC_LAYER:
            for i in range(n_layer):
                params[f"h.{i}.{name}"] = np.ascontiguousarray(arr[i].T)   # .T: (out, in) -> (in, out)
        else:
            params[name] = arr[:vocab] if name == "wte" else arr        # drop the padding rows
    return params, config


def save_llmc(params: dict, config: GPT2Config, path: str | os.PathLike) -> None:
    """Writes params in llm.c's float32 format (version 3), wte zero-padded to a multiple of 128."""
    check_params(params, config, source="GPT-2 params to save")
    if config.layer_norm_epsilon != 1e-5:
        raise WeightsError(f"{path}: llm.c files fix layer_norm_epsilon at 1e-5, "
                           f"these params use {config.layer_norm_epsilon}")
    padded_vocab = -(-config.vocab_size // LLMC_VOCAB_MULTIPLE) * LLMC_VOCAB_MULTIPLE
    header = np.zeros(LLMC_HEADER_INTS, dtype="<i4")
    header[:8] = (LLMC_MAGIC, LLMC_FP32, config.n_ctx, config.vocab_size, config.n_layer,
                  config.n_head, config.n_embd, padded_vocab)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for name, shape in _llmc_layout(config, padded_vocab):
            if name == "wte":
                arr = np.zeros(shape, dtype=np.float32)
                arr[:config.vocab_size] = params["wte"]
            elif name in _LLMC_LAYER:
                arr = np.stack([params[f"h.{i}.{name}"].T for i in range(config.n_layer)])
            else:
                arr = params[name]
            f.write(np.ascontiguousarray(arr, dtype="<f4").tobytes())


# -- checkpoints by name: a directory, an llm.c .bin, or a Hugging Face hub name --------------------------

HUB_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "vocab.json",
             "merges.txt")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
GPT2_EOT = 50256              # <|endoftext|> of GPT-2's tokenizer (vocabulary 50257)


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        return Path(env).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _cached_snapshot(repo_id: str) -> tuple[Path | None, str]:
    """(the cached snapshot directory holding config.json and model.safetensors, "") or (None, what is missing).
    Layout: <cache>/models--org--name/refs/main holds a commit hash, snapshots/<hash>/ the files."""
    cache = hub_cache_dir()
    names = [repo_id] + ([f"openai-community/{repo_id}"] if "/" not in repo_id else [])
    missing = []
    for name in names:
        repo = cache / ("models--" + name.replace("/", "--"))
        ref = repo / "refs" / "main"
        if not ref.is_file():
            missing.append(str(ref))
            continue
        snapshot = repo / "snapshots" / ref.read_text().strip()
        lacking = [f for f in ("config.json", "model.safetensors") if not (snapshot / f).is_file()]
        if not lacking:
            return snapshot, ""
        missing.append(", ".join(str(snapshot / f) for f in lacking))
    return None, " and ".join(missing)


def resolve_checkpoint(name: str) -> Path:
    """A local directory or file as is; otherwise a Hugging Face hub name (gpt2, openai-community/gpt2-medium,
    user/model): through huggingface_hub where importable (it downloads when online), else read from the
    hub cache directly. Raises DataError saying what is missing and the command that fetches it."""
    path = Path(name).expanduser()
    if path.exists() or not _HUB_NAME.match(name) or name.endswith(".bin"):
        if not path.exists():
            raise DataError(f"{name}: not found")
        return path
    why = ""
    try:
        import huggingface_hub                  # optional (extra gpt2): downloads, and knows every cache setting
    except ImportError:
        huggingface_hub = None
    if huggingface_hub is not None:
        try:
            snapshot = Path(huggingface_hub.snapshot_download(name, allow_patterns=list(HUB_FILES)))
            if (snapshot / "config.json").is_file() and (snapshot / "model.safetensors").is_file():
                return snapshot
            why = " (the hub repository has no config.json + model.safetensors)"
        except Exception as e:                  # offline, no network, unknown repository: say so below
            why = f" ({type(e).__name__})"
    snapshot, missing = _cached_snapshot(name)
    if snapshot is not None:
        return snapshot
    mode = "HF_HUB_OFFLINE=1 is set" if _offline() else "it could not be downloaded" + why
    fetch = (f"hf download {name} " + " ".join(HUB_FILES[:4]) +
             ("" if huggingface_hub is not None else " (after pip install huggingface_hub)"))
    raise DataError(f"{name}: not a local path, and not in the Hugging Face cache ({missing} missing; {mode}); "
                    f"fetch it with: {fetch}")


def load_checkpoint(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], GPT2Config]:
    path = Path(path)
    return load_hf(path) if path.is_dir() else load_llmc(path)


def eos_token_id(path: str | os.PathLike, config: GPT2Config) -> int | None:
    """The end-of-text token: generation_config.json's eos_token_id, else config.json's (the first of a
    list); for an llm.c file with GPT-2's vocabulary, <|endoftext|> (50256); else None."""
    path = Path(path)
    if path.is_dir():
        for name in ("generation_config.json", "config.json"):
            try:
                raw = json.loads((path / name).read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            eos = raw.get("eos_token_id") if isinstance(raw, dict) else None
            if isinstance(eos, list):
                eos = eos[0] if eos else None
            if isinstance(eos, int) and 0 <= eos < config.vocab_size:
                return eos
        return None
    return GPT2_EOT if config.vocab_size == GPT2_EOT + 1 else None
