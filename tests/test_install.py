"""A non-editable install works on its own: the wheel `pip wheel .` builds carries the kernels, the variant
catalogue, the test split and the weights, and its console scripts run from an unrelated directory.

The wheel is installed without dependencies into a fresh venv; numpy, scikit-image and tqdm come from the
running interpreter's site-packages through a .pth line (a line, not a site folder: the checkout's editable
install is not activated there), so the test needs no network and the package under test is the wheel's."""
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from convnet.paths import BUNDLED_FOLDERS, CHECKOUT_ROOT

pytestmark = pytest.mark.slow


def sh(*cmd, cwd, env=None, timeout=600):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin folder, environment, an unrelated working directory) with the wheel installed."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"                       # build from a copy: the checkout gets no build/ folder
    shutil.copytree(CHECKOUT_ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "results", ".whl"))
    p = sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp / "wheel", src,
           cwd=tmp)
    assert p.returncode == 0, p.stderr
    wheel = next((tmp / "wheel").glob("convnet-*.whl"))
    venv = tmp / "venv"
    assert sh(sys.executable, "-m", "venv", venv, cwd=tmp).returncode == 0
    bin_dir = venv / "bin"
    p = sh(bin_dir / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp)
    assert p.returncode == 0, p.stderr
    purelib = sh(bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp)
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib.stdout.strip()) / "_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp), "CONVNET_CACHE": str(tmp / "cache")}
    return bin_dir, env, elsewhere


def test_the_installed_package_is_the_wheels_with_every_bundled_folder(installed):
    bin_dir, env, cwd = installed
    code = ("import convnet, convnet.paths as p, pkgutil; "
            "assert {'convnet.bench', 'convnet.gpu', 'convnet.gpt2', 'convnet.bench.compare'} <= "
            "{m.name for m in pkgutil.walk_packages(convnet.__path__, 'convnet.')}; print(convnet.__file__); "
            "print(*[p.bundled(f) for f in p.BUNDLED_FOLDERS], sep='\\n')")
    p = sh(bin_dir / "python", "-c", code, cwd=cwd, env=env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split()
    venv = str(bin_dir.parent)
    assert lines[0].startswith(venv), f"imported {lines[0]}, not the installed wheel"
    for folder, path in zip(BUNDLED_FOLDERS, lines[1:]):
        assert path.startswith(venv) and path.endswith(f"convnet/_bundled/{folder}")
    assert CHECKOUT_ROOT.as_posix() not in p.stdout


def test_convnet_cpu_run_and_list_from_another_directory(installed):
    bin_dir, env, cwd = installed
    p = sh(bin_dir / "convnet", "--variant", "cpu", "--batch", "100", cwd=cwd, env=env)
    assert p.returncode == 0, p.stderr
    assert "Test batch size: 100" in p.stdout and "Test Accuracy: 0.9000" in p.stdout
    listing = sh(bin_dir / "convnet", "--list", cwd=cwd, env=env)
    assert listing.returncode == 0, listing.stderr
    assert "tc_fused" in listing.stdout and "baseline" in listing.stdout
    gpt2 = sh(bin_dir / "convnet", "--model", "gpt2", "--list", cwd=cwd, env=env)
    assert gpt2.returncode == 0 and "fast_mma" in gpt2.stdout


@pytest.mark.parametrize("script", ["convnet", "convnet-predict", "convnet-gpt2"])
def test_console_scripts_report_the_version(installed, script):
    bin_dir, env, cwd = installed
    import convnet
    p = sh(bin_dir / script, "--version", cwd=cwd, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith(convnet.__version__)


def test_convnet_predict_classifies_pngs_as_labelled_from_another_directory(installed):
    """Three test-split images written as PNG files are classified as labelled (images the network gets right)."""
    from skimage.io import imsave
    from convnet import data
    bin_dir, env, cwd = installed
    raw = data.load_raw("test")
    names = {0: "Ankle boot", 1: "Pullover", 2: "Trouser"}        # the first three test labels: 9, 2, 1
    assert [int(raw.labels[i]) for i in names] == [9, 2, 1]
    files = []
    for i in names:
        f = cwd / f"img{i}.png"
        imsave(f, raw.images[i], check_contrast=False)
        files.append(f.name)
    p = sh(bin_dir / "convnet-predict", "--variant", "cpu", *files, cwd=cwd, env=env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 3
    for line, (i, cls) in zip(lines, names.items()):
        assert line.startswith(f"img{i}.png") and f"\t{cls}\t" in line + "\t", line
