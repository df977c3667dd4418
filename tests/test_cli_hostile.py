"""Every command over bad input and hostile paths, as a user's shell runs them: outputs equal to inputs, '-',
folders, a CONVNET_CACHE holding someone's files, closed pipes, Ctrl-C. Each case checks the exit code, one line on
stderr without a traceback, and that no file outside the case's named outputs changed (the whole working folder,
cache included, hashed before and after)."""
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from convnet.paths import CHECKOUT_ROOT as ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "gpt2_tiny"
COMMANDS = {"convnet": [str(ROOT / "run_milestone.py")], "convnet-predict": ["-m", "convnet.predict"],
            "convnet-gpt2": ["-m", "convnet.gpt2"], "convnet-bench": ["-m", "convnet.bench.cli"]}


def tree(root: Path) -> dict:
    """relative path -> sha256 of every file under root (folders as entries too)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def work(tmp_path):
    """A user's folder: a picture, a folder of pictures, a GPT-2 checkpoint, and a CONVNET_CACHE that is really a
    folder of their own files."""
    from PIL import Image
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (40, 30), dtype=np.uint8)).save(tmp_path / "victim.png")
    (tmp_path / "photos").mkdir()
    Image.fromarray(rng.integers(0, 255, (28, 28), dtype=np.uint8)).save(tmp_path / "photos" / "a.png")
    shutil.copytree(FIXTURE, tmp_path / "ckpt")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("years of work\n")
    (tmp_path / "home" / "cubin").mkdir()              # a folder of theirs that happens to bear a cache name
    (tmp_path / "home" / "cubin" / "notes.txt").write_text("mine\n")
    return tmp_path


def run(work, command, *args, cache="home", stdout=subprocess.PIPE, timeout=300):
    env = {**os.environ, "CONVNET_CACHE": str(work / cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *COMMANDS[command], *args], cwd=work, env=env, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# (command, args, what stderr's one line says); every case exits 2 and changes nothing
REFUSED = [
    ("convnet", ["--clear-cache"], "no .convnet-cache marker"),
    ("convnet", ["--variant", "cpu", "--batch", "5", "--json", "photos"], "--json photos: is a directory"),
    ("convnet-bench", ["roofline", "--variant", "cpu", "--plot", "-"], "--plot writes a PNG"),
    ("convnet-bench", ["compare", "cpu", "--batch", "5", "--json", "photos"], "--json photos: is a directory"),
    ("convnet", ["--variant", "cpu", "--batch", "5", "--json", "victim.npz", "--weights", "victim.npz"],
     "is one of the inputs"),
    ("convnet-predict", ["victim.png", "--json", "victim.png"], "--json victim.png: is one of the inputs"),
    ("convnet-predict", ["victim.png", "--csv", "victim.png"], "--csv victim.png: is one of the inputs"),
    ("convnet-predict", ["photos", "--csv", "photos/a.png"], "is one of the inputs"),
    ("convnet-predict", ["victim.png", "--json", "photos"], "--json photos: is a directory"),
    ("convnet-predict", ["victim.png", "--json", "r.json", "--csv", "./r.json"], "name the same file"),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--json", "ckpt/config.json"],
     "--json ckpt/config.json: lies inside ckpt"),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--json", "ckpt/new.json"],
     "lies inside ckpt"),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--json", "ckpt"], "is a directory"),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--temperature", "1e308"],
     "--temperature must be 0 (greedy) or lie in"),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--temperature", "1e-300"],
     "--temperature must be 0 (greedy) or lie in"),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--repetition-penalty", "1e300"],
     "--repetition-penalty must lie in"),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--prompts-file", "victim.png",
                      "--json", "victim.png"], "is one of the inputs"),
]


@pytest.mark.parametrize("command,args,message", REFUSED, ids=[f"{c} {' '.join(a)}" for c, a, _ in REFUSED])
def test_refused_in_one_line_and_nothing_changes(work, command, args, message):
    if "victim.npz" in args:
        shutil.copy(ROOT / "datasets" / "lenet86" / "weights.npz", work / "victim.npz")
    before = tree(work)
    p = run(work, command, *args)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert message in one_line(p.stderr)
    assert tree(work) == before


def test_bench_generate_without_a_gpu_is_one_line(work):
    from convnet.gpu import available
    if available()[0]:
        pytest.skip("a GPU is present: this checks the GPU-less machine")
    p = run(work, "convnet-bench", "generate")
    assert p.returncode == 2 and "needs one: " in one_line(p.stderr)


@pytest.mark.parametrize("command,args", [
    ("convnet-predict", ["victim.png", "--json", "-", "--quiet"]),
    ("convnet-predict", ["victim.png", "--csv", "-", "--quiet"]),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--max-new-tokens", "3", "--variant",
                      "cpu", "--json", "-"]),
])
def test_dash_is_standard_output(work, command, args):
    before = tree(work)
    p = run(work, command, *args)
    assert p.returncode == 0, p.stderr
    assert p.stdout.lstrip().startswith(("{", "source")), p.stdout[:200]
    assert tree(work) == before and not (work / "-").exists()


def test_an_output_beside_its_input_is_written(work):
    p = run(work, "convnet-predict", "photos", "--json", "photos/predictions.json", "--quiet")
    assert p.returncode == 0, p.stderr
    assert '"predictions"' in (work / "photos" / "predictions.json").read_text()


@pytest.mark.parametrize("command,args", [
    ("convnet", ["--list"]),
    ("convnet-predict", ["photos", "victim.png"]),
    ("convnet-gpt2", ["generate", "--checkpoint", "ckpt", "--tokens", "1,2", "--max-new-tokens", "3", "--variant",
                      "cpu"]),
])
def test_closed_pipe_ends_quietly(work, command, args):
    """`convnet --list | head -1` with the reader already gone: exit 0 or 141, no traceback."""
    r, w = os.pipe()
    os.close(r)                                        # nobody will read: the first write fails with EPIPE
    try:
        p = run(work, command, *args, stdout=w)
    finally:
        os.close(w)
    assert p.returncode in (0, 141), p.stderr
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr


def test_ctrl_c_is_one_line_exit_130_and_nothing_half_written(work):
    env = {**os.environ, "CONVNET_CACHE": str(work / "cache"), "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, str(ROOT / "run_milestone.py"), "--variant", "cpu", "--batch", "10000",
                          "--json", "r.json"], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # (a shell's background job ignores SIGINT, and a child that starts with it ignored never gets Ctrl-C)
    first = p.stderr.read(1)                           # the preprocessing's progress bar: main() is running
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    err = first + err
    assert p.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "run_milestone.py: interrupted"   # after progress
    assert not (work / "r.json").exists() and not list(work.glob(".r.json*"))


def test_a_huge_picture_is_refused_from_its_header(work):
    from PIL import Image
    Image.new("L", (8000, 7000)).save(work / "huge.png")          # 56 megapixels of zeros: a small file
    t0 = time.perf_counter()
    p = run(work, "convnet-predict", "huge.png", "--strict", "--variant", "cpu")
    assert p.returncode == 2 and "56 megapixels, more than the 50" in one_line(p.stderr)
    assert time.perf_counter() - t0 < 60


# -- the cache -------------------------------------------------------------------------------------------
def _cache_made_by_the_project(root: Path) -> None:
    """What the project leaves in its cache: the marker (written when it made the folder), cubins, data."""
    from convnet import paths
    with pytest.MonkeyPatch.context() as m:
        m.setenv("CONVNET_CACHE", str(root))
        paths.prepare_cache("cubin")
        (root / "cubin" / "k.cubin").write_bytes(b"x" * 2048)
        (root / "fashion-abc.npy").write_bytes(b"y" * 1024)


def test_clear_cache_removes_what_the_project_made(work):
    cache = work / "cache"
    _cache_made_by_the_project(cache)
    assert (cache / ".convnet-cache").is_file()
    p = run(work, "convnet", "--clear-cache", cache="cache")
    assert p.returncode == 0, p.stderr
    assert f"removed {cache}" in p.stdout and not cache.exists()


def test_clear_cache_keeps_what_it_did_not_make(work):
    """A marked cache where someone also put their own file: the project's entries go, their file and the folder
    stay."""
    cache = work / "cache"
    _cache_made_by_the_project(cache)
    (cache / "mine.txt").write_text("keep me\n")
    p = run(work, "convnet", "--clear-cache", cache="cache")
    assert p.returncode == 0, p.stderr
    assert sorted(e.name for e in cache.iterdir()) == [".convnet-cache", "mine.txt"]


def test_the_project_does_not_mark_a_folder_of_someone_elses(work, monkeypatch):
    """Writing into a CONVNET_CACHE that holds foreign files adds the project's entries but no marker, so a later
    --clear-cache deletes nothing there."""
    monkeypatch.setenv("CONVNET_CACHE", str(work / "home"))
    from convnet import paths
    paths.prepare_cache("cubin")
    assert not (work / "home" / ".convnet-cache").exists()


def test_clear_cache_that_cannot_be_removed_is_one_line(work, monkeypatch):
    """A read-only or immutable cache (root ignores chmod, so the failure is simulated): one line, exit 2."""
    from convnet import cli
    cache = work / "cache"
    _cache_made_by_the_project(cache)
    monkeypatch.setenv("CONVNET_CACHE", str(cache))

    def refuse(path, *a, **k):
        raise PermissionError(1, "Operation not permitted", str(path))
    monkeypatch.setattr(shutil, "rmtree", refuse)
    assert cli.main(["--clear-cache"]) == 2
    assert (cache / "cubin" / "k.cubin").is_file()
