"""The recorded measurements: one table per model (results/<model>.csv in a checkout), a row per figure, appended
when a command is asked to (--record). The docs' tables quote these rows; the story of how a figure moved is the
commit log's."""
from __future__ import annotations

import csv
import io
import os
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from .errors import UsageError
from .outputs import check_output
from .paths import CHECKOUT_ROOT

COLUMNS = ("variant", "benchmark", "figure", "unit", "gpu", "driver", "commit", "date")


def table_path(model: str, path=None) -> Path:
    """The table a --record appends to: `path`, else the checkout's results/<model>.csv (an installed package has no
    checkout: then a path must be given). Checked before any work."""
    if path is None:
        folder = CHECKOUT_ROOT / "results"
        if not folder.is_dir() or not (CHECKOUT_ROOT / ".git").exists():
            raise UsageError("--record: no checkout's results/ folder here; give the table's path (--record FILE.csv)")
        path = folder / f"{model}.csv"
    p = Path(check_output(path, "--record"))
    if str(path) == "-":
        raise UsageError("--record appends to a file: give its path")
    if p.exists() and p.read_text().splitlines()[:1] != [",".join(COLUMNS)]:
        raise UsageError(f"--record {p}: not a results table (its first line is not {','.join(COLUMNS)})")
    return p


def _commit() -> str:
    """$CONVNET_COMMIT where set (a copy of a checkout whose .git is not the tree's, as a device call's may be), else
    the checkout's commit (with + where the tree has changes), or the package version outside a checkout."""
    if os.environ.get("CONVNET_COMMIT"):
        return os.environ["CONVNET_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(CHECKOUT_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(CHECKOUT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    from . import __version__
    return f"v{__version__}"


def append(path: Path, rows: list[tuple]) -> int:
    """Appends (variant, benchmark, figure, unit) rows with this machine's GPU, driver, the commit and the UTC date,
    the header first where the table is new; the whole append goes in one write. Returns the rows written."""
    from .gpu import describe
    gpu = describe()
    meta = (gpu.get("name", "no GPU"), gpu.get("driver", ""), _commit(),
            datetime.now(timezone.utc).strftime("%Y-%m-%d"))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if not path.exists():
        writer.writerow(COLUMNS)
    for variant, benchmark, figure, unit in rows:
        writer.writerow((variant, benchmark, f"{figure:.6g}" if isinstance(figure, float) else figure, unit, *meta))
    try:
        with open(path, "a") as f:
            f.write(out.getvalue())
    except OSError as e:
        raise UsageError(f"cannot append to {path}: {e.strerror or e}") from None
    return len(rows)


def read(model: str, path=None) -> list[dict]:
    """The rows of a model's table (the checkout's results/<model>.csv by default), oldest first."""
    p = Path(path) if path else CHECKOUT_ROOT / "results" / f"{model}.csv"
    try:
        with open(p, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        raise UsageError(f"results table {p}: {e.strerror or e}") from None


def markdown(model: str, path=None) -> str:
    """The latest figure of each (variant, benchmark, GPU) as a markdown table, in the table's order."""
    latest = {}
    for row in read(model, path):
        latest[(row["variant"], row["benchmark"], row["gpu"])] = row
    lines = ["| variant | benchmark | figure | GPU | commit, date |", "| --- | --- | --- | --- | --- |"]
    order = {}                                  # a benchmark's rows together, benchmarks in first-recorded order
    for r in latest.values():
        order.setdefault(r["benchmark"], len(order))
    for r in sorted(latest.values(), key=lambda r: order[r["benchmark"]]):
        lines.append(f"| `{r['variant']}` | {r['benchmark'].replace('|', '/')} | {_figure(r['figure'])} {r['unit']} | "
                     f"{r['gpu'].removeprefix('NVIDIA ')} | {r['commit']}, {r['date']} |")
    return "\n".join(lines)


# A docs table drawn from a results table: the lines between these markers are markdown(model)'s.
_BLOCK = re.compile(r"(<!-- results: (\w+) -->\n)(.*?)(<!-- /results -->)", re.S)


def figures_by_gpu(rows: list[dict], variant: str, benchmark: str) -> str:
    """The latest figure of (variant, benchmark) on each GPU that has one: "0.757 ms (H100 80GB HBM3), 0.70 ms
    (H200)"; "-" where none is recorded."""
    latest = {}
    for r in rows:
        if r["variant"] == variant and r["benchmark"] == benchmark:
            latest[r["gpu"]] = r
    return ", ".join(f"{_figure(r['figure'])} {r['unit']} ({gpu.removeprefix('NVIDIA ')})"
                     for gpu, r in latest.items()) or "-"


def _figure(text: str) -> str:
    """A recorded figure to four significant digits for a table (the CSV keeps what was measured)."""
    try:
        x = float(text)
    except ValueError:
        return text
    if abs(x) >= 1000:
        return f"{x:.0f}"
    return f"{x:.4g}" if sum(ch.isdigit() for ch in text.lstrip("0.-")) > 4 else text


def variant_table(model: str, benchmark: str, names: list[str], path=None) -> str:
    """A "choosing a variant" table: each named variant of `model`'s catalogue, its title, and the latest figure of
    `benchmark` on each GPU (figures_by_gpu)."""
    from . import catalogue
    rows = read(model, path)
    lines = [f"| variant | what it is | {benchmark.replace('|', '/')} |", "| --- | --- | --- |"]
    for name in names:
        if name.startswith("HF ") or name.startswith("pytorch"):   # an anchor measured beside the variants
            what, label = "anchor: the same benchmark in the same run", name
        else:
            what, label = catalogue.get(name, model).title.replace("|", "/"), f"`{name}`"
        lines.append(f"| {label} | {what} | {figures_by_gpu(rows, name, benchmark)} |")
    return "\n".join(lines)


# A variants table: <!-- variants: MODEL | BENCHMARK | NAME NAME ... --> ... <!-- /variants -->
_VARIANTS = re.compile(r"(<!-- variants: (\w+) \| ([^|]+?) \| ([^>]+?) -->\n)(.*?)(<!-- /variants -->)", re.S)


def _names(text: str) -> list[str]:
    """A block's variant names: space-separated, or comma-separated where one has a space (an anchor's)."""
    return [n.strip() for n in text.split(",")] if "," in text else text.split()


def render_docs(text: str) -> str:
    """text with each results block and each variants block redrawn from its table."""
    text = _BLOCK.sub(lambda m: f"{m.group(1)}{markdown(m.group(2))}\n{m.group(4)}", text)
    return _VARIANTS.sub(lambda m: f"{m.group(1)}{variant_table(m.group(2), m.group(3).strip(), _names(m.group(4)))}"
                                   f"\n{m.group(6)}", text)


DOCS = ("README.md", "docs/lenet.md", "docs/gpt2.md", "docs/kernels.md", "docs/onnx.md")


def redraw_docs(check: bool = False) -> list[str]:
    """Redraws the results blocks of the checkout's docs (check: only lists those that are stale)."""
    stale = []
    for name in DOCS:
        p = CHECKOUT_ROOT / name
        text = p.read_text()
        new = render_docs(text)
        if new != text:
            stale.append(name)
            if not check:
                p.write_text(new)
    return stale
