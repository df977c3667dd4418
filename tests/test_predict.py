"""convnet-predict: pictures of the test split written as files (PNG, JPEG, colour, other sizes, inverted),
arrays (.npy, IDX), and every bad input: one line, exit 2, nothing half-written."""
import csv
import gzip
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from convnet import __version__, data, network, predict, reference
from convnet.errors import DataError

ROOT = Path(__file__).resolve().parent.parent
N = 24


@pytest.fixture(scope="module")
def split():
    raw = data.load_raw("test")
    return raw.images[:N], raw.labels[:N].astype(np.int64)


@pytest.fixture(scope="module")
def reference_logits(split, lenet_weights):
    """What the main job computes for the same images: its preprocessing, the numpy network."""
    return network.forward(data.upscale(split[0]), lenet_weights)


@pytest.fixture(scope="module")
def png_dir(tmp_path_factory, split):
    from skimage.io import imsave
    folder = tmp_path_factory.mktemp("pngs")
    for i, img in enumerate(split[0]):
        imsave(folder / f"{i:03d}.png", img, check_contrast=False)
    return folder


def predict_json(tmp_path, capsys, *args):
    """Runs convnet-predict in this process on the cpu variant; (its JSON, its stdout lines)."""
    out = tmp_path / "out.json"
    assert predict.main([*map(str, args), "--variant", "cpu", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    return json.loads(out.read_text()), lines


def cli(*args, cwd=ROOT):
    """convnet-predict in a subprocess: (exit code, stdout, stderr lines)."""
    done = subprocess.run([sys.executable, "-m", "convnet.predict", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)
    return done.returncode, done.stdout, done.stderr.splitlines()


def classes(payload):
    return [p["class_index"] for p in payload["predictions"]]


def test_pngs_of_the_test_split_are_classified_as_the_main_job_does(tmp_path, capsys, png_dir, split,
                                                                      reference_logits):
    payload, lines = predict_json(tmp_path, capsys, png_dir)
    assert payload["version"] == __version__ and payload["variant"] == "cpu" and "CPU" in payload["device"]
    preds = payload["predictions"]
    assert [p["source"] for p in preds] == [str(png_dir / f"{i:03d}.png") for i in range(N)]     # sorted
    assert classes(payload) == reference_logits.argmax(1).tolist()
    probs = reference.softmax(reference_logits.astype(np.float64))
    np.testing.assert_allclose([p["probability"] for p in preds], probs.max(1), rtol=1e-5)
    assert np.mean(np.array(classes(payload)) == split[1]) >= 0.85
    assert all(p["class"] == data.CLASS_NAMES[p["class_index"]] and len(p["top"]) == 1 for p in preds)
    first = lines[0].split("\t")
    assert first[0] == preds[0]["source"] and first[1] == preds[0]["class"] and float(first[2]) > 0.5
    assert len(lines) == N


def test_colour_pictures_of_other_sizes(tmp_path, capsys, split, reference_logits):
    """RGB, RGBA, grey + alpha, JPEG, larger and smaller, not square: grey, 28 x 28, the same class."""
    from skimage.io import imsave
    images, _ = split
    confident = [i for i in range(N) if reference.softmax(reference_logits[i].astype(np.float64)).max() > 0.99][:4]
    assert len(confident) == 4
    made = []
    for k, i in enumerate(confident):
        big = np.kron(images[i], np.ones((3, 2), np.uint8))                    # 84 x 56
        rgb = np.stack([big, big, big], axis=-1)                                # grey in colour: rgb2gray gives it back
        tint = (rgb * np.array([1.0, 0.9, 0.8])).astype(np.uint8)              # colour proper
        variants = {"rgb.png": rgb, "rgba.png": np.dstack([tint, np.full(big.shape, 255, np.uint8)]),
                    "la.png": np.dstack([big, np.full(big.shape, 128, np.uint8)]), "rgb.jpg": tint,
                    "small.png": images[i][::2, ::2]}
        for suffix, pixels in variants.items():
            path = tmp_path / f"{k}-{suffix}"
            imsave(path, pixels, check_contrast=False)
            made.append((path, i, suffix))
    payload, _ = predict_json(tmp_path, capsys, *(m[0] for m in made))
    want = reference_logits.argmax(1)
    got = {(i, suffix): c for (_, i, suffix), c in zip(made, classes(payload))}
    for (i, suffix), c in got.items():
        if suffix != "small.png":               # half the resolution may well change the class
            assert c == want[i], (i, suffix)
    # the documented steps: rgb2gray, resize with anti-aliasing when shrinking, rounding to uint8
    from skimage.color import rgb2gray
    from skimage.transform import resize
    rgb = np.stack([np.kron(images[0], np.ones((3, 2), np.uint8))] * 3, axis=-1)
    want0 = np.rint(resize(rgb2gray(rgb), (28, 28), order=1, mode="reflect", anti_aliasing=True) * 255)
    np.testing.assert_array_equal(predict.to_fashion(rgb, "x"), want0.astype(np.uint8))
    np.testing.assert_array_equal(predict.to_fashion(images[0], "x"), images[0])


def test_invert(tmp_path, capsys, split, reference_logits):
    from skimage.io import imsave
    for i, img in enumerate(split[0][:8]):
        imsave(tmp_path / f"{i}.png", 255 - img, check_contrast=False)         # dark objects on white
    inverted, _ = predict_json(tmp_path, capsys, *(tmp_path / f"{i}.png" for i in range(8)), "--invert")
    assert classes(inverted) == reference_logits[:8].argmax(1).tolist()
    plain, _ = predict_json(tmp_path, capsys, *(tmp_path / f"{i}.png" for i in range(8)))
    assert classes(plain) != classes(inverted)


def write_idx(path, arr):
    payload = struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()
    path.write_bytes(gzip.compress(payload))
    return path


def test_arrays_npy_uint8_float_other_size_and_idx(tmp_path, capsys, split, reference_logits):
    from skimage.transform import resize
    images = split[0][:6]
    np.save(tmp_path / "u8.npy", images)
    np.save(tmp_path / "f32.npy", images.astype(np.float32) / 255)
    big = np.stack([resize(img / 255.0, (40, 40), order=1) for img in images])
    np.save(tmp_path / "big.npy", big)
    write_idx(tmp_path / "pics-idx3-ubyte.gz", images)
    payload, _ = predict_json(tmp_path, capsys, tmp_path / "u8.npy", tmp_path / "f32.npy",
                              tmp_path / "pics-idx3-ubyte.gz", tmp_path / "big.npy")
    sources = [p["source"] for p in payload["predictions"]]
    assert sources[:6] == [f"{tmp_path / 'u8.npy'}[{i}]" for i in range(6)]
    assert sources[12] == f"{tmp_path / 'pics-idx3-ubyte.gz'}[0]" and len(sources) == 24
    want = reference_logits[:6].argmax(1).tolist()
    got = classes(payload)
    assert got[:6] == want and got[6:12] == want and got[12:18] == want     # uint8, float, IDX: the same pictures
    assert np.mean(np.array(got[18:]) == want) >= 5 / 6                     # resized there and back
    # the float array rounds back to exactly the uint8 pictures
    (_, u8, _), (_, f32, _) = (predict.decode_stack(n, predict.load_array(tmp_path / n, n).images, 0, False)
                               for n in ("u8.npy", "f32.npy"))
    np.testing.assert_array_equal(u8, f32)


def test_top_json_and_csv(tmp_path, capsys, png_dir):
    out_csv = tmp_path / "out.csv"
    payload, lines = predict_json(tmp_path, capsys, png_dir, "--top", "3", "--csv", out_csv)
    for pred, text in zip(payload["predictions"], lines):
        top = pred["top"]
        assert len(top) == 3 and top[0]["class_index"] == pred["class_index"]
        assert top[0]["probability"] == pred["probability"]
        probs = [t["probability"] for t in top]
        assert probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-9
        assert len({t["class_index"] for t in top}) == 3
        cells = text.split("\t")
        assert len(cells) == 7 and cells[1::2] == [t["class"] for t in top]
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == N
    for row, pred in zip(rows, payload["predictions"]):
        assert row["source"] == pred["source"] and int(row["class_index"]) == pred["class_index"]
        assert row["class"] == pred["class"] and abs(float(row["probability"]) - pred["probability"]) < 1e-6
        assert row["class_3"] == pred["top"][2]["class"]
        assert abs(float(row["probability_2"]) - pred["top"][1]["probability"]) < 1e-6


def test_pool_chunks_and_order(tmp_path, capsys, png_dir, split):
    """A process pool, chunks smaller than the input and a stack cut across chunks give what one process
    and one chunk give, in the order of the arguments."""
    np.save(tmp_path / "u8.npy", split[0][:10])
    args = [png_dir, tmp_path / "u8.npy", png_dir / "003.png"]
    one, _ = predict_json(tmp_path, capsys, *args, "--workers", "1")
    many, _ = predict_json(tmp_path, capsys, *args, "--workers", "2", "--chunk", "7")
    assert len(one["predictions"]) == N + 11 and classes(one) == classes(many)
    assert [p["source"] for p in one["predictions"]] == [p["source"] for p in many["predictions"]]
    np.testing.assert_allclose([p["probability"] for p in one["predictions"]],     # BLAS sums per batch size
                               [p["probability"] for p in many["predictions"]], rtol=1e-5)
    assert one["predictions"][-1]["source"] == str(png_dir / "003.png")
    pool = predict.Workers(2, 3 * predict.MIN_PER_TASK)
    assert pool.count == 2 and isinstance(pool._pool, predict.ProcessPoolExecutor)
    pool.shutdown(wait=True)
    assert predict.Workers(8, 5).count == 1 and predict.Workers(8, 5)._pool is None   # too few for a pool


def test_chunks_cut_stacks_at_the_boundary():
    stack = predict.Stack("a.npy", np.zeros((5, 28, 28), np.uint8))
    pics = [predict.Picture("x.png"), predict.Picture("y.png")]
    parts = list(predict.chunks([pics[0], stack, pics[1]], 4))
    assert parts == [[pics[0], (stack, 0, 3)], [(stack, 3, 5), pics[1]]]
    assert [predict._size(p) for p in parts] == [4, 3]


def test_an_unreadable_file_is_named_and_skipped(tmp_path, png_dir):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    code, out, err = cli(png_dir / "000.png", bad, png_dir / "001.png", "--variant", "cpu")
    assert code == 0, err
    assert [line.split("\t")[0] for line in out.splitlines()] == [str(png_dir / "000.png"), str(png_dir / "001.png")]
    named = [line for line in err if "broken.png" in line]
    assert len(named) == 1 and named[0].startswith("convnet-predict: skipped")
    assert not any("Traceback" in line for line in err)
    assert "1 skipped" in err[-1]


def _bad(tmp_path, png_dir, case):
    """Arguments of one bad invocation, and the text its one line must hold."""
    out = tmp_path / "out.json"
    good = png_dir / "000.png"
    if case == "strict":
        (tmp_path / "notes.txt").write_text("no picture")
        return [good, tmp_path / "notes.txt", "--strict", "--json", out], "notes.txt: not a readable image"
    if case == "empty folder":
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "README.txt").write_text("no picture")
        return [tmp_path / "empty", "--json", out], "no pictures in this folder"
    if case == "nothing readable":
        (tmp_path / "a.png").write_text("no picture")
        return [tmp_path / "a.png", "--json", out], "no picture could be classified"
    if case == "missing path":
        return [tmp_path / "nope.png", "--json", out], "nope.png: no such file or folder"
    if case == "json is a folder":
        out.mkdir()
        return [good, "--json", out], "is a directory"
    if case == "json parent missing":
        return [good, "--json", tmp_path / "no" / "out.json"], "does not exist"
    if case == "csv parent missing":
        return [good, "--json", out, "--csv", tmp_path / "no" / "out.csv"], "does not exist"
    if case == "top 11":
        return [good, "--top", "11", "--json", out], "there are 10 classes"
    if case == "workers 0":
        return [good, "--workers", "0", "--json", out], "must be at least 1"
    if case == "unknown variant":
        return [good, "--variant", "nope", "--json", out], "unknown lenet86 variant 'nope'"
    arrays = {"npy 2-D": np.zeros((28, 28), np.uint8), "npy 4-D": np.zeros((2, 1, 28, 28), np.uint8),
              "npy int64": np.zeros((2, 28, 28), np.int64), "npy above 1": np.full((2, 28, 28), 1.5, np.float32),
              "npy negative": np.full((2, 28, 28), -0.1), "npy NaN": np.full((2, 28, 28), np.nan, np.float32),
              "npy empty": np.zeros((0, 28, 28), np.uint8)}
    messages = {"npy 2-D": "save arr[None]", "npy 4-D": "expected N x H x W", "npy int64": "dtype int64",
                "npy above 1": "must lie in [0, 1], found 1.5 .. 1.5", "npy negative": "must lie in [0, 1]",
                "npy NaN": "NaN", "npy empty": "holds no pictures"}
    if case in arrays:
        np.save(tmp_path / "bad.npy", arrays[case])
        return [good, tmp_path / "bad.npy", "--json", out], messages[case]
    if case == "npy pickled":
        np.save(tmp_path / "bad.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
        return [tmp_path / "bad.npy", "--json", out], "not a readable .npy array"
    if case == "idx labels":
        write_idx(tmp_path / "labels-idx1-ubyte.gz", np.zeros(3, np.uint8))
        return [tmp_path / "labels-idx1-ubyte.gz", "--json", out], "1 dimensions, expected 3"
    raise AssertionError(case)


BAD = ["strict", "empty folder", "nothing readable", "missing path", "json is a folder", "json parent missing",
       "csv parent missing", "top 11", "workers 0", "unknown variant", "npy 2-D", "npy 4-D", "npy int64",
       "npy above 1", "npy negative", "npy NaN", "npy empty", "npy pickled", "idx labels"]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, png_dir, case):
    args, message = _bad(tmp_path, png_dir, case)
    if "--variant" not in args:
        args += ["--variant", "cpu"]
    code, out, err = cli(*args)
    assert code == 2, (case, err)
    problems = [line for line in err if "skipped" not in line]              # "nothing readable" names its file
    assert len(problems) == 1 and problems[0].startswith("convnet-predict: error:"), err
    assert message in problems[0], (message, err)
    assert not any("Traceback" in line for line in err)
    assert not (tmp_path / "out.json").is_file() and not (tmp_path / "out.csv").exists()
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_failed_write_leaves_no_partial_file(tmp_path, png_dir, monkeypatch, capsys):
    """The disk fills while --json is written: one line, exit 2, neither the file nor a temporary one."""
    real = Path.write_text

    def full_disk(self, text, *args, **kw):
        real(self, text[:10], *args, **kw)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_text", full_disk)
    assert predict.main([str(png_dir / "000.png"), "--variant", "cpu", "--json", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"convnet-predict: error: cannot write {tmp_path / 'out.json'}: No space left on device"
    assert list(tmp_path.iterdir()) == []


def test_strict_error_is_a_data_error(png_dir, tmp_path):
    (tmp_path / "x.png").write_text("no")
    tasks = predict.submit_decode(predict.Workers(1, 1), [predict.Picture(str(tmp_path / "x.png"))], False)
    with pytest.raises(DataError, match="x.png: not a readable image .* \\(--strict\\)"):
        predict.gather(tasks, strict=True)


def test_version_and_help_from_another_folder(tmp_path):
    code, out, _ = cli("--version", cwd=tmp_path)
    assert code == 0 and out.strip() == f"convnet-predict {__version__}"
    code, out, _ = cli("--help", cwd=tmp_path)
    assert code == 0 and "--invert" in out and "dark background" in out


@pytest.mark.gpu
def test_default_gpu_variant_agrees_with_cpu_on_200_pngs(tmp_path):
    from skimage.io import imsave
    from convnet.runner import resolve_variant
    raw = data.load_raw("test").images[:200]
    folder = tmp_path / "pngs"
    folder.mkdir()
    for i, img in enumerate(raw):
        imsave(folder / f"{i:03d}.png", img, check_contrast=False)
    code, _, err = cli(folder, "--json", tmp_path / "gpu.json", "--quiet")
    assert code == 0, err
    gpu = json.loads((tmp_path / "gpu.json").read_text())
    variant = resolve_variant("auto")
    assert gpu["variant"] == variant.name and variant.needs_gpu and "CPU" not in gpu["device"]
    code, _, err = cli(folder, "--json", tmp_path / "cpu.json", "--quiet", "--variant", "cpu")
    assert code == 0, err
    cpu = json.loads((tmp_path / "cpu.json").read_text())
    flips = sum(a != b for a, b in zip(classes(gpu), classes(cpu)))
    assert len(classes(gpu)) == 200 and flips <= (0 if variant.precision == "fp32" else 2), flips
    np.testing.assert_allclose([p["probability"] for p in gpu["predictions"]],
                               [p["probability"] for p in cpu["predictions"]], atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["tc_fused", "fused"])
def test_lenet_classify_in_chunks(name, lenet_weights):
    """gpu.lenet.classify over chunks (a short last one) gives one forward pass's logits, for a variant that
    uploads uint8 pictures and one that uploads the preprocessed batch."""
    from convnet import catalogue
    from convnet.gpu.lenet import GPULeNet, classify
    from convnet.gpu.runtime import Runtime
    raw = data.load_raw("test").images[:300]
    x = data.upscale(raw)
    net = GPULeNet(catalogue.get(name), lenet_weights, Runtime.get())
    whole, _, _ = net.forward(net.host_input(x, raw), timed=False)
    got = classify(net, x if not net.uint8_input else None, raw if net.uint8_input else None, chunk=128)
    np.testing.assert_array_equal(got, whole)
    with pytest.raises(ValueError, match="takes"):
        classify(net, None, None)


def test_other_formats_and_frames(tmp_path, capsys, split, reference_logits):
    """GIF (one frame), 16-bit and palette PNG, TIFF, BMP: the same picture; a GIF of three frames is skipped."""
    from PIL import Image
    img = split[0][0]
    Image.fromarray(img).save(tmp_path / "one.gif")
    Image.fromarray(img.astype(np.uint16) * 257).save(tmp_path / "deep.png")
    Image.fromarray(img).convert("P").save(tmp_path / "palette.png")
    Image.fromarray(img).save(tmp_path / "pic.tif")
    Image.fromarray(img).save(tmp_path / "pic.bmp")
    frames = [Image.fromarray(a) for a in split[0][:3]]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    names = ["one.gif", "deep.png", "palette.png", "pic.tif", "pic.bmp", "anim.gif"]
    args = [*(str(tmp_path / n) for n in names), "--variant", "cpu", "--json", str(tmp_path / "o.json")]
    assert predict.main(args) == 0
    payload = json.loads((tmp_path / "o.json").read_text())
    assert [Path(p["source"]).name for p in payload["predictions"]] == names[:5]
    assert classes(payload) == [int(reference_logits[0].argmax())] * 5
    err = capsys.readouterr().err
    assert "skipped" in err and "anim.gif: holds 3 frames" in err


@pytest.mark.parametrize("name", ["tc_fused", "fused"])
def test_lenet_classify_chunks_without_a_gpu(name, lenet_weights, monkeypatch):
    """The host side of gpu.lenet.classify on the dry-run runtime: the chunks (a short last one) cover the
    batch in order, through one pinned buffer, with the input the variant uploads."""
    from convnet import catalogue
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.lenet import GPULeNet, classify
    rt = RecordingRuntime()
    rt.pinned = lambda shape, dtype: np.full(shape, 77, dtype)
    net = GPULeNet(catalogue.get(name), lenet_weights, rt)
    seen = []

    def forward(x_host, timed=True):          # logits that say which pictures came in
        seen.append((x_host.shape, x_host.dtype))
        flat = x_host.reshape(len(x_host), -1).astype(np.float64)
        return np.repeat(flat[:, :1], 10, axis=1).astype(np.float32), None, {}
    monkeypatch.setattr(net, "forward", forward)
    raw = np.arange(300, dtype=np.uint8)[:, None, None] * np.ones((1, 28, 28), np.uint8)
    x = data.upscale(raw) if not net.uint8_input else None
    got = classify(net, x, raw if net.uint8_input else None, chunk=128)
    first = (raw[:, 0, 0] if net.uint8_input else x[:, 0, 0, 0]).astype(np.float32)
    np.testing.assert_array_equal(got[:, 0], first)
    assert [s[0][0] for s in seen] == [128, 128, 44]
    assert all(s[0][1:] == net.input_shape and s[1] == net.input_dtype for s in seen)


def test_folders_sorted_hidden_left_out_recursive_on_request(tmp_path, png_dir):
    import shutil
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    for name, where in (("b.png", "."), ("a.PNG", "."), (".c.png", "."), ("d.png", "sub"), ("e.png", ".hidden")):
        shutil.copy(png_dir / "000.png", tmp_path / where / name)
    (tmp_path / "notes.txt").write_text("not a picture: not even tried in a folder")
    flat = [Path(p.source).name for p in predict.collect([str(tmp_path)])]
    deep = [str(Path(p.source).relative_to(tmp_path)) for p in predict.collect([str(tmp_path)], recursive=True)]
    assert flat == ["a.PNG", "b.png"] and deep == ["a.PNG", "b.png", "sub/d.png"]
