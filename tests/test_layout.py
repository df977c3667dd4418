"""The engine (what a user's inference runs) never imports the instruments' oracles and plotting:
every engine module imports with torch, transformers and matplotlib made unimportable."""
import pkgutil
import subprocess
import sys

import convnet

BLOCKED = ("torch", "transformers", "matplotlib")
# Not the engine: the instruments package, and the script that trained the shipped weights (PyTorch by design).
NOT_ENGINE = ("convnet.bench", "convnet.train")


def engine_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(convnet.__path__, "convnet.")]
    return sorted(n for n in names if not n.startswith(NOT_ENGINE) and not n.endswith("__main__"))


def import_blocked(modules) -> subprocess.CompletedProcess:
    """Imports `modules` in a fresh interpreter in which BLOCKED cannot be imported (PyCUDA may be missing:
    that ImportError alone is tolerated, CI has no GPU)."""
    code = f"""
import importlib, importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError("blocked for the layout test: " + name)
sys.meta_path.insert(0, Block())
for m in {list(modules)!r}:
    try:
        importlib.import_module(m)
    except ImportError as e:
        if "blocked" in str(e) or "pycuda" not in str(e):
            raise SystemExit(m + ": " + str(e))
print("ok")
"""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_engine_modules_import_without_torch_transformers_matplotlib():
    modules = engine_modules()
    assert {"convnet.cli", "convnet.runner", "convnet.gpu.lenet", "convnet.gpt2.gpu", "convnet.gpu.runtime"} <= set(modules)
    p = import_blocked(modules)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr


def test_the_blocker_catches_a_module_that_needs_torch(tmp_path, monkeypatch):
    """The check above can fail: a module that imports torch is stopped by the same blocker."""
    (tmp_path / "needs_torch.py").write_text("import torch\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    p = import_blocked(["json", "needs_torch"])
    assert p.returncode != 0 and "needs_torch: blocked for the layout test: torch" in p.stdout + p.stderr


def test_instruments_live_in_the_bench_package():
    """Every benchmark, sweep and anchor is under convnet.bench, none under the engine's folders."""
    names = {m.name for m in pkgutil.walk_packages(convnet.__path__, "convnet.")}
    for stem in ("bench", "anchor", "autotune", "sweep", "roofline", "ceilings", "small_batch", "dryrun", "plot"):
        misplaced = [n for n in names if stem in n.rsplit(".", 1)[-1] and not n.startswith("convnet.bench")]
        assert not misplaced, misplaced


def test_the_engine_never_imports_the_instruments():
    """convnet, convnet-predict and convnet-gpt2 (every engine module, lazily or not) import nothing from
    convnet/bench: the measurements are convnet-bench's."""
    import ast
    from pathlib import Path
    root = Path(convnet.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in ("bench", "_bundled") or rel.name == "train.py":
            continue
        package = ["convnet", *rel.parent.parts]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join([*base, node.module or ""]).strip(".")
                names = [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n == "convnet.bench" or n.startswith("convnet.bench.") for n in names):
                offenders.append(f"{rel}:{node.lineno}")
    assert not offenders, offenders
