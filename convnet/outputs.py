"""The commands' output files (--json, --csv, --plot, recorded results): checked before any work, written
atomically, '-' for standard output.

An output may not be a folder, one of the command's inputs, or lie inside a folder the command reads as a whole
(a checkpoint): one clear line names the clash instead of a user's file being replaced."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import UsageError

STDOUT = "-"


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _inside(p: Path, folder: Path) -> bool:
    try:
        return folder.is_dir() and p.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def check_output(path, option: str, inputs=(), folders=()) -> Path | str:
    """The output `path` of `option` (e.g. --json) as a Path, or STDOUT for '-'. Refused in one line (UsageError):
    a folder, one of `inputs`, a path inside one of `folders`, a missing or read-only parent folder."""
    if str(path) == STDOUT:
        return STDOUT
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    for given in inputs:
        if given is not None and str(given) != STDOUT and _same(p, Path(given)):
            raise UsageError(f"{option} {path}: is one of the inputs ({given}); give another file name")
    for folder in folders:
        if folder is not None and _inside(p, Path(folder)):
            raise UsageError(f"{option} {path}: lies inside {folder}, which this command reads; write it elsewhere")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable")
    return p


def check_distinct(outputs: dict) -> None:
    """Two options naming the same file (other than '-') are refused."""
    named = [(opt, Path(p)) for opt, p in outputs.items() if p is not None and str(p) != STDOUT]
    for i, (a, pa) in enumerate(named):
        for b, pb in named[i + 1:]:
            if _same(pa, pb):
                raise UsageError(f"{a} and {b} name the same file")


def write_output(path, text: str) -> None:
    """Writes text to standard output ('-') or through a temporary file in the same folder renamed into place: a
    failure or Ctrl-C leaves nothing half-written (and no temporary file)."""
    if str(path) == STDOUT:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        tmp.replace(p)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
        raise
