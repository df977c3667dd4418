"""The per-device GEMM tuning cache that req_5 reads: variant -> GEMM shape -> the winning -D constants and
split-K factor. `python -m convnet.bench.autotune` measures and writes it; the engine only reads it."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import DataError
from ..paths import device_cache_file, prepare_cache


def cache_file(device_name: str) -> Path:
    return device_cache_file("autotune", device_name)


def load(device_name: str) -> dict:
    """variant name -> {"MxNxK": {"defines": ..., "splits": ...}}; {} where nothing was tuned yet."""
    path = cache_file(device_name)
    if not path.is_file():
        return {}
    try:
        table = json.loads(path.read_text())
        for shapes in table.values():
            for config in shapes.values():
                dict(config["defines"]), int(config["splits"])
        return table
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataError(f"{path}: corrupt autotune cache ({e}); delete it or run python -m convnet.bench.autotune") from None


def save(device_name: str, variant: str, winners: dict) -> Path:
    table = load(device_name)
    table[variant] = winners
    path = cache_file(device_name)
    prepare_cache("autotune")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
    tmp.replace(path)
    return path
