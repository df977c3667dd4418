"""Reads a .safetensors file into numpy arrays, half-precision floats included.

The safetensors package's numpy loader stops at BF16 (numpy has no bfloat16), which is how
checkpoints saved from torch in bfloat16 are stored. The format is simple enough to read here:
an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
then the tensors' bytes. Floats come back as float32 (F16 and BF16 widen exactly, F64 rounds
once); integer and bool tensors keep their type. Every problem is a DataError naming the file.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..gpu.bf16 import from_bf16

# safetensors dtype -> (numpy type of the stored bytes, little-endian)
_STORED = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}
_MAX_HEADER = 100 * 1024 * 1024     # the format's own limit on the JSON header


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: not found")

    def corrupt(why: str) -> DataError:
        return DataError(f"{path}: not a readable safetensors file, truncated or corrupt ({why})")

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise DataError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) < 8:
        raise corrupt(f"{len(data)} bytes, shorter than the 8-byte header length")
    n = int.from_bytes(data[:8], "little")
    if n > _MAX_HEADER or 8 + n > len(data):
        raise corrupt(f"a {n}-byte header in a {len(data)}-byte file")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise corrupt(f"header: {e}") from None
    if not isinstance(header, dict):
        raise corrupt("the header is not a JSON object")
    body = memoryview(data)[8 + n:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
            count = math.prod(shape)
            ok = all(isinstance(d, int) and d >= 0 for d in (*shape, start, end))
        except (TypeError, KeyError, ValueError):
            raise corrupt(f"tensor {name}: bad header entry {entry!r}") from None
        if dtype not in _STORED:
            raise DataError(f"{path}: tensor {name} is stored as {dtype}, which this loader does not read "
                            f"(it reads {', '.join(_STORED)})")
        stored = np.dtype(_STORED[dtype])
        if not ok or end - start != count * stored.itemsize or end > len(body):
            raise corrupt(f"tensor {name}: bytes {start}..{end} for {count} x {dtype} "
                          f"in a {len(body)}-byte body")
        arr = np.frombuffer(body[start:end], dtype=stored).reshape(shape)
        if dtype == "BF16":
            arr = from_bf16(arr)
        elif dtype in ("F16", "F64"):
            arr = arr.astype(np.float32)
        else:
            arr = arr.astype(stored.newbyteorder("="))    # a copy: writable, native byte order
        tensors[name] = arr
    return tensors
