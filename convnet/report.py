"""Results of a run and their presentation: the seed report's lines, comparison tables, JSON."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .outputs import write_output


@dataclass
class RunResult:
    variant: str
    batch: int
    device: str
    op_ms: list            # per conv layer: the convolution kernels alone
    layer_ms: list         # per conv layer: convolution + ReLU + pooling + its transfers
    total_ms: float        # the whole forward pass, input upload to logits download
    accuracy: float
    extra: dict = field(default_factory=dict)
    predictions: object = field(default=None, repr=False)   # predicted class per image (numpy), not in JSON


def seed_report(r: RunResult) -> str:
    lines = [f"Variant: {r.variant}   Device: {r.device}", f"Test batch size: {r.batch}"]
    for i, (op, layer) in enumerate(zip(r.op_ms, r.layer_ms), 1):
        lines.append(f"Conv-forward layer {i}:  Op Time: {op:10.3f} ms   Layer Time: {layer:10.3f} ms")
    lines.append(f"Total execution time: {r.total_ms:.3f} ms")
    if r.extra.get("streams", 1) > 1:
        lines.append(f"Streams: {r.extra['streams']}; (upload + kernels + download) / total = "
                     f"{r.extra['overlap']:.2f} (1.00 = no overlap)")
    lines.append(f"Test Accuracy: {r.accuracy:.4f}")
    return "\n".join(lines)


def table(headers: list[str], rows: list[list], title: str = "") -> str:
    """A plain fixed-width table (also valid Markdown)."""
    cells = [[_fmt(c) for c in row] for row in rows]
    numeric = [all(isinstance(r[i], (int, float)) for r in rows) for i in range(len(headers))]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    out = [title] if title else []
    out.append("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |")
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    out += ["| " + " | ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric)) + " |"
            for r in cells]
    return "\n".join(out)


def _fmt(c) -> str:
    if isinstance(c, float):
        return f"{c:.3f}" if abs(c) < 1e5 else f"{c:.0f}"
    return str(c)


def metadata() -> dict:
    """What a results file records besides the figures: package version, UTC time, the GPU and its driver."""
    from datetime import datetime, timezone
    from . import __version__
    from .gpu import describe
    return {"version": __version__, "timestamp_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "gpu": describe() or None}


def as_dict(r: RunResult) -> dict:
    """A run's figures for JSON (the per-image predictions are written only on request)."""
    d = asdict(r)
    d.pop("predictions")
    return d


def save_json(path, payload) -> None:
    def default(o):
        if isinstance(o, RunResult):
            return as_dict(o)
        return o.tolist() if hasattr(o, "tolist") else str(o)
    write_output(path, json.dumps(payload, indent=2, default=default))
