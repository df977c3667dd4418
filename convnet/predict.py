"""convnet-predict: classify your own pictures into Fashion-MNIST's ten classes with LeNet-86.

    convnet-predict shirt.jpg photos/ stack.npy t10k-images-idx3-ubyte.gz --top 3 --json out.json

Inputs: image files (PNG, JPEG, anything scikit-image reads), folders (their image files and .npy arrays,
sorted by name; --recursive for sub-folders), .npy arrays (N x H x W, uint8 or float in [0, 1]) and IDX
files (named explicitly). What a picture goes through:

1. decode (skimage.io.imread), in a process pool (--workers), one chunk of images (--chunk) at a time;
2. grey: colour -> skimage.color.rgb2gray, an alpha channel dropped;
3. 28 x 28: skimage.transform.resize (bilinear, mode "reflect", anti-aliasing when shrinking), stretched,
   not cropped; then rounded to uint8, the form of Fashion-MNIST's own files; --invert here;
4. the main job's preprocessing, data.upscale (28 -> 86), on the host for the cpu variant and variants that
   upload 86 x 86 images, on the GPU for those that upload uint8 (the default GPU variant does it inside conv1);
5. the network on --variant, and the softmax of its logits.

Fashion-MNIST's pictures are light objects on a dark background; a dark object photographed on a white
background needs --invert. Arrays are checked before anything runs (a bad one: one line, exit 2); an image
file that cannot be decoded is named in one line and skipped (--strict: exit 2).
"""
from __future__ import annotations

import argparse
import csv
import importlib
import io
import itertools
import json
import math
import multiprocessing
import os
import platform
import signal
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import __version__, data, network, reference, weights as wio
from .cmdline import OneLineParser, positive_int
from .errors import DataError, UsageError, exit_code
from .outputs import check_distinct, check_output, write_output

PROG = "convnet-predict"
SIZE = data.SRC_SIZE
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pbm",
                  ".pnm"}
MAX_PIXELS = 50_000_000   # a picture past this is refused from its header (decoding alone would take minutes)
MIN_PER_TASK = 16          # images per pool task at least: below, inter-process traffic costs more than decoding


# -- inputs ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Picture:
    """One image file, decoded in the pool."""
    source: str


@dataclass(frozen=True)
class Stack:
    """A checked array of pictures: (N, H, W) uint8, or float in [0, 1] (a .npy may stay memory-mapped)."""
    source: str
    images: np.ndarray


def _is_idx(path: Path) -> bool:
    name = path.name.lower()
    return "idx" in name or name.endswith(("ubyte", "ubyte.gz"))


def collect(paths: list[str], recursive: bool = False, colour: bool = False,
            channels: int | None = None) -> list[Picture | Stack]:
    """The inputs in order: a path that does not exist, a folder without pictures or an unusable array is an
    error here, before anything runs. Image files are only named here; they are decoded during the run. colour
    (your own network's pictures): .npy arrays may also hold colour pictures, or maps of the model's `channels`
    (load_array)."""
    items: list[Picture | Stack] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            members = sorted(p.rglob("*") if recursive else p.iterdir())
            found = [m for m in members if m.is_file() and m.suffix.lower() in IMAGE_SUFFIXES | {".npy"}
                     and not any(part.startswith(".") for part in m.relative_to(p).parts)]   # hidden
            if not found:
                kinds = ", ".join(sorted(IMAGE_SUFFIXES | {".npy"}))
                raise DataError(f"{arg}: no pictures in this folder{' or below' if recursive else ''} ({kinds})")
            items += [load_array(m, str(m), colour, channels) if m.suffix.lower() == ".npy" else Picture(str(m))
                      for m in found]
        elif p.is_file():
            if p.suffix.lower() == ".npy" or _is_idx(p):
                items.append(load_array(p, arg, colour, channels))
            else:
                items.append(Picture(arg))
        else:
            raise DataError(f"{arg}: no such file or folder")
    return items


def load_array(path: Path, source: str, colour: bool = False, channels: int | None = None) -> Stack:
    """A .npy (memory-mapped) or IDX file as a Stack, with its shape, dtype and range checked: N x H x W grey
    pictures, and with colour also N x H x W x C (C 1, 3, or 4 with alpha) or N x C x H x W (C 1 or 3), and
    either with C = channels (a model's input of other than 1 or 3 channels)."""
    if path.suffix.lower() == ".npy":
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise DataError(f"{source}: not a readable .npy array ({e})") from None
    else:
        arr = data.read_idx(path, ndim=3)
    maps = channels if colour and channels not in (None, 1, 3) else None    # the model's own channel count
    coloured = colour and arr.ndim == 4 and (arr.shape[-1] in (1, 3, 4) or arr.shape[1] in (1, 3)
                                             or maps in (arr.shape[1], arr.shape[-1]))
    if arr.ndim != 3 and not coloured:
        hint = " (for one picture, save arr[None])" if arr.ndim == 2 else ""
        what = "N x H x W grey pictures" + (", N x H x W x C or N x C x H x W colour ones (C 1 or 3; 4 with "
                                             "alpha, channels last" + (f"; or C = {maps}, the model's" if maps else "")
                                             + ")" if colour else "")
        raise DataError(f"{source}: array of shape {arr.shape}; expected {what}{hint}")
    if 0 in arr.shape:
        raise DataError(f"{source}: array of shape {arr.shape} holds no pictures")
    if arr.dtype.kind == "f":
        lo, hi = math.inf, -math.inf
        for s in range(0, len(arr), 4096):          # in blocks: a memory-mapped array stays on disk
            block = np.asarray(arr[s:s + 4096])
            if not np.isfinite(block).all():
                raise DataError(f"{source}: holds NaN or infinite values")
            lo, hi = min(lo, float(block.min())), max(hi, float(block.max()))
        if lo < 0 or hi > 1:
            raise DataError(f"{source}: float values must lie in [0, 1], found {lo:g} .. {hi:g} "
                            "(uint8 arrays hold 0..255)")
    elif arr.dtype != np.uint8:
        raise DataError(f"{source}: dtype {arr.dtype}; expected uint8 (0..255) or float in [0, 1]")
    return Stack(source, arr)


def count(items) -> int:
    return sum(1 if isinstance(it, Picture) else len(it.images) for it in items)


# -- one picture -> 28 x 28 uint8 -----------------------------------------------------------------------
def to_fashion(img: np.ndarray, source: str) -> np.ndarray:
    """Any picture -> (28, 28) uint8 grey, as Fashion-MNIST's files hold their images."""
    if img.ndim == 2 and img.shape == (SIZE, SIZE) and img.dtype == np.uint8:
        return img
    from skimage.color import rgb2gray
    from skimage.transform import resize
    from skimage.util import img_as_float
    if img.ndim == 4 and len(img) == 1:              # one frame of a format that holds several (GIF)
        img = img[0]
    if img.ndim == 4:
        raise DataError(f"{source}: holds {len(img)} frames; give one picture per file")
    if img.ndim == 3 and img.shape[-1] in (2, 4):    # grey + alpha, RGBA: the alpha channel is dropped
        img = img[..., :-1]
    if img.ndim == 3 and img.shape[-1] == 1:
        img = img[..., 0]
    if img.ndim == 3 and img.shape[-1] == 3:
        img = rgb2gray(img)
    if img.ndim != 2:
        raise DataError(f"{source}: not one grey or colour picture (pixel array of shape {img.shape})")
    img = img_as_float(img)
    if img.shape != (SIZE, SIZE):
        shrink = img.shape[0] > SIZE or img.shape[1] > SIZE
        img = resize(img, (SIZE, SIZE), order=1, mode="reflect", anti_aliasing=shrink, preserve_range=True)
    return _to_uint8(img)


def _to_uint8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(np.asarray(x, np.float64) * 255.0), 0, 255).astype(np.uint8)


def _finish(images: list, invert: bool) -> np.ndarray:
    out = np.stack(images) if images else np.empty((0, SIZE, SIZE), np.uint8)
    return 255 - out if invert else out


def decode_files(paths: list[str], invert: bool) -> tuple[list[str], np.ndarray, list[str]]:
    """(the paths decoded, their pictures (k, 28, 28) uint8, one line per file that could not be used)."""
    from skimage.io import imread
    done, images, problems = [], [], []
    for p in paths:
        try:
            _check_pixels(p)
            images.append(to_fashion(np.asarray(imread(p)), p))
            done.append(p)
        except DataError as e:
            problems.append(str(e))
        except Exception as e:       # noqa: BLE001 -- whatever a file holds, it is named and skipped
            problems.append(f"{p}: not a readable image ({_why(e)})")
    return done, _finish(images, invert), problems


def _check_pixels(path: str) -> None:
    """Refuses a picture of more than MAX_PIXELS from its header, before decoding it (a 100-megapixel PNG took
    minutes to decode and resize to 28 x 28)."""
    from PIL import Image
    try:
        with Image.open(path) as im:
            width, height = im.size
    except Exception:                # noqa: BLE001 -- not a format Pillow reads: scikit-image decides
        return
    if width * height > MAX_PIXELS:
        raise DataError(f"{path}: {width} x {height} is {width * height / 1e6:.0f} megapixels, more than the "
                        f"{MAX_PIXELS / 1e6:.0f} convnet-predict takes; shrink it first (it becomes 28 x 28)")


def _why(e: Exception) -> str:
    """A decoder's complaint in one short line (imageio's can span several, with install hints)."""
    text = " ".join(str(e).split())
    if text.startswith("Could not find a backend"):
        return "not a format scikit-image reads"
    return text[:160] or type(e).__name__


def decode_stack(source: str, part: np.ndarray, start: int, invert: bool) -> tuple[list[str], np.ndarray, list]:
    """Pictures start.. of an array (a slice of it: a worker gets only its own part) as (k, 28, 28) uint8."""
    part = np.asarray(part)
    names = [f"{source}[{i}]" for i in range(start, start + len(part))]
    if part.shape[1:] == (SIZE, SIZE):               # no resize: the whole block at once
        out = part if part.dtype == np.uint8 else _to_uint8(part)
        return names, (255 - out if invert else out.copy()), []
    return names, _finish([to_fashion(img, n) for img, n in zip(part, names)], invert), []


# -- the process pool -------------------------------------------------------------------------------------
class Workers:
    """Where decoding and resizing run: a pool of forked processes (they inherit the imported modules
    instead of importing them again), or this process where one worker or too few pictures (fewer than
    MIN_PER_TASK each) would not pay for a pool."""

    def __init__(self, workers: int, pictures: int):
        self.count = max(1, min(workers, math.ceil(pictures / MIN_PER_TASK)))
        self._pool = None
        if self.count > 1:
            for module in ("skimage.color", "skimage.io", "skimage.transform", "skimage.util"):
                importlib.import_module(module)
            ctx = multiprocessing.get_context("fork") if sys.platform == "linux" else None
            self._pool = ProcessPoolExecutor(self.count, mp_context=ctx, initializer=_ignore_interrupts)

    def submit(self, fn, *args) -> Future:
        if self._pool is not None:
            return self._pool.submit(fn, *args)
        return _done(fn(*args))

    def shutdown(self, wait: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)

    def task_size(self, n: int) -> int:
        """About four tasks per worker (the load evens out), at least MIN_PER_TASK pictures each."""
        return max(MIN_PER_TASK, math.ceil(n / (4 * self.count)))


def _done(result) -> Future:
    f = Future()
    f.set_result(result)
    return f


def _ignore_interrupts() -> None:
    """Ctrl-C reaches the whole process group: the main process stops the run, the workers stay quiet."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def chunks(items, size: int):
    """The inputs cut into chunks of at most `size` pictures: lists of Picture and (Stack, start, stop)."""
    part, n = [], 0
    for it in items:
        if isinstance(it, Picture):
            part.append(it)
            n += 1
        else:
            s0 = 0
            while s0 < len(it.images):
                take = min(size - n, len(it.images) - s0)
                part.append((it, s0, s0 + take))
                n, s0 = n + take, s0 + take
                if n == size:
                    yield part
                    part, n = [], 0
            continue
        if n == size:
            yield part
            part, n = [], 0
    if part:
        yield part


def _size(chunk: list) -> int:
    return sum(1 if isinstance(p, Picture) else p[2] - p[1] for p in chunk)


def submit_decode(pool: Workers, chunk: list, invert: bool) -> list[Future]:
    """The chunk's decoding as tasks, in order: runs of image files and stacks to resize, in groups, on the
    pool; stacks already 28 x 28 here at once (nothing to decode, and no copy to a worker)."""
    per = pool.task_size(_size(chunk))
    tasks, files = [], []

    def flush():
        for s in range(0, len(files), per):
            tasks.append(pool.submit(decode_files, files[s:s + per], invert))
        files.clear()

    for piece in chunk:
        if isinstance(piece, Picture):
            files.append(piece.source)
            continue
        flush()
        stack, start, stop = piece
        if stack.images.shape[1:] == (SIZE, SIZE):
            tasks.append(_done(decode_stack(stack.source, stack.images[start:stop], start, invert)))
            continue
        for s in range(start, stop, per):
            tasks.append(pool.submit(decode_stack, stack.source, np.asarray(stack.images[s:min(stop, s + per)]),
                                     s, invert))
    flush()
    return tasks


def gather(tasks: list[Future], strict: bool) -> tuple[list[str], np.ndarray]:
    """The decoded chunk: (sources, pictures (n, 28, 28) uint8). A file that could not be used is named on
    stderr and left out, or with `strict` stops the run."""
    names, parts = [], []
    for t in tasks:
        done, images, problems = t.result()
        for line in problems:
            if strict:
                raise DataError(f"{line} (--strict)")
            print(f"{PROG}: skipped {line}", file=sys.stderr)
        names += done
        parts.append(images)
    return names, (np.concatenate(parts) if parts else np.empty((0, SIZE, SIZE), np.uint8))


def upscale(pool: Workers, images: np.ndarray) -> np.ndarray:
    """The main job's 28 -> 86 preprocessing (data.upscale), over the pool."""
    per = pool.task_size(len(images))
    parts = [pool.submit(data.upscale, images[s:s + per]) for s in range(0, len(images), per)]
    return np.concatenate([p.result() for p in parts]) if parts else data.upscale(images)


# -- the network ---------------------------------------------------------------------------------------
class Network:
    """LeNet-86 on one variant: logits of (n, 28, 28) uint8 pictures, preprocessed where the variant needs."""

    def __init__(self, variant, weights: dict):
        self.variant, self.weights, self.gpu = variant, weights, None
        self.host_upscale = True                   # the cpu path and variants that upload 86 x 86 images
        self.device = f"CPU ({platform.processor() or platform.machine()}, numpy)"
        if variant.needs_gpu:
            from .gpu.lenet import GPULeNet, uploads_uint8
            from .gpu.runtime import Runtime
            rt = Runtime.get()
            self.gpu = GPULeNet(variant, weights, rt)
            self.host_upscale = not uploads_uint8(variant)
            self.device = rt.name

    def logits(self, raw: np.ndarray, x: np.ndarray | None) -> np.ndarray:
        if self.gpu is None:
            return network.forward(x, self.weights)
        from .gpu.lenet import classify
        return classify(self.gpu, x, raw)


# -- output ----------------------------------------------------------------------------------------------
@dataclass
class Results:
    sources: list
    top: list          # arrays (n, k) of class indices, one per chunk
    prob: list         # arrays (n, k) of probabilities

    def add(self, names, top, prob) -> None:
        self.sources.append(names)
        self.top.append(top)
        self.prob.append(prob)

    def count(self) -> int:
        return sum(len(n) for n in self.sources)

    def rows(self):
        for names, idx, prob in zip(self.sources, self.top, self.prob):
            for name, i, p in zip(names, idx, prob):
                yield name, i.tolist(), p.tolist()


def line(name: str, idx, prob, classes=data.CLASS_NAMES) -> str:
    """source, class, probability (tab-separated), then the runners-up with --top."""
    cells = [name] + [f"{classes[i]}\t{p:.4f}" for i, p in zip(idx, prob)]
    return "\t".join(cells)


def to_json(res: Results, variant: str, device: str, classes=data.CLASS_NAMES, **extra) -> str:
    preds = [{"source": name, "class_index": idx[0], "class": classes[idx[0]], "probability": prob[0],
              "top": [{"class_index": i, "class": classes[i], "probability": p} for i, p in zip(idx, prob)]}
             for name, idx, prob in res.rows()]
    return json.dumps({"version": __version__, "variant": variant, "device": device, **extra,
                       "predictions": preds}, indent=1) + "\n"


def to_csv(res: Results, k: int, classes=data.CLASS_NAMES) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["source", "class_index", "class", "probability"]
               + [f"{what}_{r}" for r in range(2, k + 1) for what in ("class_index", "class", "probability")])
    for name, idx, prob in res.rows():
        cells = [name]
        for i, p in zip(idx, prob):
            cells += [i, classes[i], f"{p:.6f}"]
        w.writerow(cells)
    return out.getvalue()


# -- the run ---------------------------------------------------------------------------------------------
def classify_chunk(net: Network, pool: Workers, raw: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(top-k class indices, their probabilities), each (n, k), of (n, 28, 28) uint8 pictures."""
    x = upscale(pool, raw) if net.host_upscale else None
    probs = reference.softmax(net.logits(raw, x).astype(np.float64))
    top = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    return top, np.take_along_axis(probs, top, axis=1)


def run(items, variant, weights: dict, workers: int, chunk: int = 10000, invert: bool = False,
        strict: bool = False, top: int = 1, emit=None) -> tuple[Results, Network]:
    """Every picture of `items` through the pipeline, a chunk at a time: the pool decodes chunk i + 1 while
    chunk i is classified. emit(sources, top, prob) is called per chunk, as soon as it is classified."""
    from tqdm import tqdm
    total = count(items)
    pool = Workers(workers, total)
    res = Results([], [], [])
    try:
        plan = chunks(items, chunk)
        current = next(plan)
        pending = submit_decode(pool, current, invert)        # decoding starts while the network is set up
        net = Network(variant, weights)
        with tqdm(total=total, unit="img", desc=f"{PROG} ({variant.name})", file=sys.stderr, disable=None,
                  leave=False) as bar:
            while pending is not None:
                names, raw = gather(pending, strict)
                size = _size(current)
                current = next(plan, None)
                pending = submit_decode(pool, current, invert) if current is not None else None
                if names:
                    idx, prob = classify_chunk(net, pool, raw, top)
                    res.add(names, idx, prob)
                    if emit is not None:
                        bar.clear()
                        emit(names, idx, prob)
                bar.update(size)
    finally:
        pool.shutdown()
    return res, net


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description="Classify pictures into Fashion-MNIST's ten classes with LeNet-86. "
                "Fashion-MNIST shows light objects on a dark background: use --invert for dark-on-light pictures.",
                epilog="Each picture becomes grey (skimage rgb2gray, alpha dropped) and 28 x 28 (skimage resize, "
                       "bilinear, anti-aliasing when shrinking; stretched, not cropped) in uint8, then goes through "
                       "the main job's 28 -> 86 preprocessing and the network. Prints one line per picture: source, "
                       "class, probability (tab-separated). Exit 2 on bad input, with one line saying why.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="image files, folders of them (and of .npy arrays), .npy arrays (N x H x W, uint8 or float "
                        "in [0, 1]; with --model also N x H x W x C or N x C x H x W colour ones, C 1 or 3 or the "
                        "model's), IDX files")
    p.add_argument("--variant", default="auto",
                   help="variant (convnet --list); 'auto' = the fastest GPU variant, or 'cpu' without a GPU")
    p.add_argument("--top", type=positive_int, default=1, metavar="K", help="also print the K most likely classes")
    p.add_argument("--json", metavar="PATH", help="write the predictions as JSON")
    p.add_argument("--csv", metavar="PATH", help="write the predictions as CSV")
    p.add_argument("--invert", action="store_true", help="invert the grey levels (dark objects on a light background)")
    p.add_argument("--recursive", action="store_true", help="also the pictures in sub-folders of a folder")
    p.add_argument("--strict", action="store_true", help="a file that is not a readable image is an error (exit 2), "
                                                          "not skipped")
    p.add_argument("--workers", type=positive_int, default=_cpu_count(),
                   help="processes decoding the pictures (default: the CPU cores this process may use)")
    p.add_argument("--chunk", type=positive_int, default=10000, help="pictures per chunk (default 10000)")
    p.add_argument("--weights", default=str(wio.WEIGHTS_FILE), help="weights .npz (default: the shipped ones)")
    p.add_argument("--quiet", action="store_true", help="no line per picture on stdout (with --json or --csv)")
    m = p.add_argument_group("your own network (an ONNX file; pip install 'convnet[onnx]')")
    m.add_argument("--model", metavar="FILE.onnx", help="classify with this network instead of LeNet-86: pictures are "
                   "resized to its input (bilinear, stretched), made grey or RGB as it takes, scaled to [0, 1], "
                   "then (x - mean) / std per channel")
    m.add_argument("--labels", metavar="FILE", help="class names, one per line (default: the model's metadata, else "
                   "the class indices)")
    m.add_argument("--mean", help="per-channel mean: one value or one per channel (default: metadata, else 0)")
    m.add_argument("--std", help="per-channel std: one value or one per channel (default: metadata, else 1)")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return p


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _main(argv) -> int:
    args = build_parser().parse_args(argv)
    if args.model is not None:
        return _main_onnx(args)
    for opt in ("labels", "mean", "std"):
        if getattr(args, opt) is not None:
            raise UsageError(f"--{opt} needs --model FILE.onnx (LeNet-86 has its own classes and preprocessing)")
    if args.top > len(data.CLASS_NAMES):
        raise UsageError(f"--top {args.top}: there are {len(data.CLASS_NAMES)} classes")
    items = collect(args.paths, args.recursive)           # names the pictures only: nothing is decoded yet
    inputs = [*args.paths, *(i.source for i in items), args.weights]
    outputs = {opt: check_output(path, opt, inputs) if path else None       # before any work
               for opt, path in (("--json", args.json), ("--csv", args.csv))}
    check_distinct(outputs)
    weights = wio.load(args.weights)
    from .runner import resolve_variant
    variant = resolve_variant(args.variant)
    t0 = time.perf_counter()
    emit = None if args.quiet else (lambda names, top, prob: print(
        "\n".join(line(n, i, p) for n, i, p in zip(names, top.tolist(), prob.tolist()))))
    res, net = run(items, variant, weights, args.workers, args.chunk, args.invert, args.strict, args.top, emit)
    total = count(items)
    done = res.count()
    if done == 0:
        raise DataError(f"no picture could be classified ({total} tried)")
    if outputs["--json"]:
        write_output(outputs["--json"], to_json(res, variant.name, net.device))
    if outputs["--csv"]:
        write_output(outputs["--csv"], to_csv(res, args.top))
    wall = time.perf_counter() - t0
    skipped = f", {total - done} skipped" if total > done else ""
    print(f"{PROG}: {done} pictures on {variant.name} ({net.device}) in {wall:.2f} s "
          f"({done / wall:,.0f} pictures/s){skipped}", file=sys.stderr)
    return 0


def _main_onnx(args) -> int:
    """convnet-predict --model FILE.onnx: the pictures through your own network (convnet.cnn.model)."""
    from .cnn import graph as cg
    from .cnn.model import Model, channel_values, labels, prepare, softmax
    from PIL import Image
    if args.weights != str(wio.WEIGHTS_FILE) or args.invert:
        raise UsageError("--weights and --invert are LeNet-86's; your model's weights are in its ONNX file")
    graph = cg.load(args.model)                               # what it cannot run: one line, before any work
    c = graph.input_shape[0]
    items = collect(args.paths, args.recursive, colour=True, channels=c)
    inputs = [*args.paths, *(i.source for i in items), args.model, *([args.labels] if args.labels else [])]
    outputs = {opt: check_output(path, opt, inputs) if path else None
               for opt, path in (("--json", args.json), ("--csv", args.csv))}
    check_distinct(outputs)
    mean, std = (channel_values(getattr(args, w), w, c, graph.meta) for w in ("mean", "std"))
    net = Model(args.model, args.variant)
    t0 = time.perf_counter()
    res, problems = Results([], [], []), []

    def pictures():
        for item in items:
            if isinstance(item, Stack):
                for n, img in enumerate(item.images):
                    yield f"{item.source}[{n}]", img
                continue
            try:
                _check_pixels(item.source)
                with Image.open(item.source) as img:
                    img.load()
                    yield item.source, img.copy()
            except DataError as e:
                problems.append(str(e))
            except Exception as e:       # noqa: BLE001 -- whatever a file holds, it is named and skipped
                problems.append(f"{item.source}: not a readable image ({_why(e)})")
            if problems and args.strict:
                raise DataError(problems[0])
    classes = None
    stream = pictures()                                       # decoded a chunk at a time, not all at once
    while part := list(itertools.islice(stream, args.chunk)):
        names, images = [n for n, _ in part], [i for _, i in part]
        prob = softmax(net.logits(prepare(images, graph.input_shape, mean, std)))
        classes = classes or labels(args.labels, graph.meta, prob.shape[1])
        k = min(args.top, prob.shape[1])
        top = np.argsort(-prob, axis=1, kind="stable")[:, :k]
        res.add(names, top, np.take_along_axis(prob, top, 1))
        if not args.quiet:
            print("\n".join(line(n, i, p, classes) for n, i, p in zip(names, top.tolist(),
                                                                      np.take_along_axis(prob, top, 1).tolist())))
    for msg in problems:
        print(f"{PROG}: skipped {msg}", file=sys.stderr)
    if res.count() == 0:
        raise DataError(f"no picture could be classified ({len(problems)} tried)")
    if outputs["--json"]:
        write_output(outputs["--json"], to_json(res, net.variant.name, net.device, classes, model=str(args.model)))
    if outputs["--csv"]:
        write_output(outputs["--csv"], to_csv(res, min(args.top, len(classes)), classes))
    wall = time.perf_counter() - t0
    print(f"{PROG}: {res.count()} pictures through {Path(args.model).name} on {net.variant.name} ({net.device}) in "
          f"{wall:.2f} s", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    return exit_code(PROG, _main, argv)


if __name__ == "__main__":
    sys.exit(main())
