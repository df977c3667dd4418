"""run_milestone.py / convnet: run one variant of LeNet-86 on the Fashion-MNIST test split (or stream many images).

Every user error ends in one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__, catalogue, report, weights as wio
from .errors import UsageError, exit_code
from .outputs import check_output
from .cmdline import OneLineParser, positive_int
from .runner import load_inputs, resolve_variant, run_variant, runs_here


def build_parser(prog: str = "convnet") -> argparse.ArgumentParser:
    p = OneLineParser(prog=prog,
                description="Classify the Fashion-MNIST test set with LeNet-86 through a chosen kernel variant.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--model", default="lenet86", metavar="{lenet86,gpt2,onnx,FILE.onnx}",
                   help="lenet86 (default: Fashion-MNIST classification); gpt2 and onnx with --list only (GPT-2's "
                        "forward benchmark is convnet-bench gpt2, its text generation convnet-gpt2 generate; your own "
                        "ONNX network: FILE.onnx runs it on random inputs with per-layer times, convnet-predict "
                        "PICTURES --model FILE.onnx classifies pictures)")
    p.add_argument("--variant", default="auto",
                   help="variant name (see --list); 'auto' = the fastest GPU variant, or 'cpu' where there is no GPU; "
                        "NAME@KEY=VALUE[,KEY=VALUE] changes a param or -D constant of it (e.g. "
                        "igemm_f16_graph@dw_pairs=0, to compare the per-layer times without one optimization)")
    p.add_argument("--batch", type=positive_int, default=None,
                   help="number of test images, 1..10000 (default 10000)")
    p.add_argument("--seq", default=None, help=argparse.SUPPRESS)           # GPT-2's: convnet-bench gpt2
    p.add_argument("--checkpoint", default=None, help=argparse.SUPPRESS)    # GPT-2's: convnet-gpt2, convnet-bench
    p.add_argument("--data-dir", default=None, help="folder with t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz "
                                                    "(default: the copy bundled under datasets/fashion-mnist)")
    p.add_argument("--weights", default=str(wio.WEIGHTS_FILE), help="weights .npz (default: the shipped ones)")
    p.add_argument("--list", action="store_true", help="list the current variants and whether each runs here")
    p.add_argument("--all", action="store_true",
                   help="--list: the archived variants too (earlier states and ablations, kept to compare against)")
    p.add_argument("--compare", nargs="*", help=argparse.SUPPRESS)         # moved: convnet-bench compare
    p.add_argument("--repeat", type=int, default=None,
                   help="timed repetitions, the median is reported (default 1)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON (with the package version, "
                                                  "a UTC timestamp, the GPU and its driver)")
    p.add_argument("--predictions", action="store_true", help="--json: also the predicted class of every image")
    p.add_argument("--record", nargs="?", const=True, metavar="CSV",
                   help="append the run's figures to the results table (default: the checkout's results/lenet86.csv)")
    p.add_argument("--clear-cache", action="store_true",
                   help="delete the cache (preprocessed data, compiled kernels, per-device measurements: "
                        "$CONVNET_CACHE, default ~/.cache/convnet) and exit")
    p.add_argument("--stream", type=positive_int, metavar="N", default=None,
                   help="lenet86: classify N images (the test set repeated) in chunks through the three-stream pipeline "
                        "(upload, kernels, download overlapped; two chunks of device memory); "
                        "prints images/s and device memory")
    p.add_argument("--chunk", type=positive_int, default=None, help="--stream: images per chunk (default 10000)")
    p.add_argument("--devices", type=device_list, metavar="all|0,1", default=None,
                   help="--stream: split the stream across these GPUs (all, or numbers such as 0,1; one process per "
                        "GPU, whole chunks each); prints images/s per GPU and in total and a digest of the predictions")
    p.add_argument("--roofline", action="store_true", help=argparse.SUPPRESS)   # moved: convnet-bench roofline
    p.add_argument("--plot", default=None, help=argparse.SUPPRESS)
    return p


def device_list(text: str):
    """argparse type for --devices: "all" or a tuple of GPU numbers (checked against the host later)."""
    from .gpu.multi import parse_devices
    try:
        return parse_devices(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--devices ")) from None


def list_variants(model: str = "lenet86", archive: bool = False) -> str:
    rows = []
    for v in catalogue.load_all(model, archive).values():
        ok, why = runs_here(v)
        if model == "gpt2" and not v.needs_gpu:       # convnet-bench gpt2 times GPU variants only
            ok, why = False, "convnet-bench gpt2 times GPU variants; convnet-gpt2 generate runs this one"
        rows.append([v.name + (" (archive)" if v.archived else ""), v.milestone, v.backend, v.precision,
                     "yes" if ok else f"no: {why}", v.title])
    return report.table(["variant", "milestone", "backend", "precision", "runs here", "title"], rows)


# the measurements that moved to the instruments' command (the engine never imports convnet/bench)
MOVED = {"compare": "convnet-bench compare VARIANT... (LeNet variants side by side)",
         "roofline": "convnet-bench roofline --variant V [--plot PNG]",
         "plot": "convnet-bench roofline --variant V --plot PNG"}


# options that only mean something with another option or model: refused instead of silently ignored
ONLY_WITH = {"predictions": ("json", "--predictions needs --json"),
             "chunk": ("stream", "--chunk needs --stream"),
             "devices": ("stream", "--devices needs --stream"),
             "all": ("list", "--all needs --list")}
LENET_ONLY = ("stream", "data_dir", "predictions", "devices")
# GPT-2's options, answered with where they live now
GPT2_OPTIONS = {"checkpoint": "convnet-gpt2 generate --checkpoint DIR (text) or convnet-bench gpt2 --checkpoint DIR",
                "seq": "convnet-bench gpt2 --seq N (the forward benchmark)"}


def check_options(args) -> None:
    """Every inconsistent or unwritable option is refused in one line before any work starts."""
    given = {k for k, v in vars(args).items() if v not in (None, False)}
    for opt, where in MOVED.items():
        if opt in given:
            raise UsageError(f"--{opt} is a measurement: run {where}")
    if args.model not in catalogue.MODELS and not args.model.lower().endswith(".onnx"):
        raise UsageError(f"--model {args.model}: one of {', '.join(catalogue.MODELS)}, or an .onnx file")
    if args.model.lower().endswith(".onnx"):
        bad = [o for o in ("stream", "data_dir", "predictions", "devices", "list", "record") if o in given] + \
            (["weights"] if args.weights != str(wio.WEIGHTS_FILE) else [])
        if bad:
            raise UsageError(f"--{bad[0].replace('_', '-')} does not apply to --model FILE.onnx")
        if args.json:
            check_output(args.json, "--json", (args.model,))
        return
    if args.model == "onnx" and not args.list:
        raise UsageError("--model onnx lists the variants for your own networks (--list); classify with "
                         "convnet-predict PICTURES --model FILE.onnx")
    if args.model == "gpt2" and not args.list:
        raise UsageError("--model gpt2 lists GPT-2's variants (--list); its forward benchmark is convnet-bench gpt2, "
                         "its text generation convnet-gpt2 generate")
    for opt, (needs, message) in ONLY_WITH.items():
        if opt in given and needs not in given:
            raise UsageError(message)
    for opt, where in GPT2_OPTIONS.items():
        if opt in given:
            raise UsageError(f"--{opt} is GPT-2's: {where}")
    wrong = [o for o in ([] if args.model == "lenet86" else LENET_ONLY) if o in given]
    if wrong:
        flag = "--" + wrong[0].replace("_", "-")
        raise UsageError(f"{flag} does not apply to --model {args.model}")
    if args.weights != str(wio.WEIGHTS_FILE) and args.model == "gpt2":
        raise UsageError("--weights is LeNet-86's; for --model gpt2 use --checkpoint")
    if args.repeat is not None and args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    if args.list and args.stream is not None:
        raise UsageError("--list does not combine with --stream")
    if args.predictions and args.stream is not None:
        raise UsageError("--predictions does not apply to --stream (its --json carries the predictions' digest)")
    if args.json:                               # what the run reads is never overwritten
        check_output(args.json, "--json", (args.weights,), (args.data_dir,))
    if args.record is not None and (args.list or args.stream is not None):
        raise UsageError("--record records the main job's run (not --list or --stream)")
    if args.record is not None:
        from .results import table_path
        args.record = table_path(args.model, None if args.record is True else args.record)


def _main(argv) -> int:
    args = build_parser(_prog()).parse_args(argv)
    if args.clear_cache:
        from .paths import clear_cache
        root, size = clear_cache()
        print(f"removed {root} ({size / 2**20:.0f} MB)" if size else f"nothing to remove at {root}")
        return 0
    check_options(args)
    if args.model.lower().endswith(".onnx"):
        from .cnn.run import run as run_onnx
        text, record = run_onnx(args.model, args.variant, args.batch or 10000, args.repeat or 1)
        print(text)
        if args.json:
            report.save_json(args.json, {**report.metadata(), **record})
        return 0
    if args.model in ("gpt2", "onnx"):
        print(list_variants(args.model, args.all))
        return 0
    args.batch = args.batch or 10000
    args.repeat = args.repeat or 1
    if args.list:
        print(list_variants(archive=args.all))
        return 0
    if args.stream is not None:
        if args.devices is not None:
            from .gpu.multi import resolve_devices
            devices = resolve_devices(args.devices)       # no GPU, or one that does not exist: one line
        v = resolve_variant(args.variant)
        if not v.needs_gpu:
            raise UsageError("--stream needs a GPU variant (e.g. fused_pool_u8)")
        record = {} if args.json else None
        if args.devices is not None:
            from .stream import stream_devices
            print(stream_devices(v, args.stream, args.chunk or 10000, devices, weights_path=args.weights,
                                 data_dir=args.data_dir, record=record))
        else:
            from .stream import stream
            print(stream(v, args.stream, args.chunk or 10000, weights_path=args.weights, data_dir=args.data_dir,
                         record=record))
        if args.json:
            report.save_json(args.json, {**report.metadata(), "stream": record})
        return 0
    v = resolve_variant(args.variant)
    from .gpu.lenet import uploads_uint8
    x, labels, weights, raw = load_inputs(args.batch, args.data_dir, args.weights,
                                          preprocessed=not (v.needs_gpu and uploads_uint8(v)))
    result = run_variant(v, x, labels, weights, args.repeat, raw)
    print(report.seed_report(result))
    if args.record is not None:
        from .results import append
        append(args.record, main_job_rows(result))
    if args.json:
        payload = {**report.metadata(), **report.as_dict(result)}
        if args.predictions:
            payload["predictions"] = [int(c) for c in result.predictions]
        report.save_json(args.json, payload)
    return 0


def main_job_rows(result) -> list[tuple]:
    """The figures of one main-job run, as results-table rows."""
    what = f"main job, batch {result.batch}"
    rows = [(result.variant, f"{what}: whole forward", result.total_ms, "ms")]
    rows += [(result.variant, f"{what}: conv{i + 1} kernels", ms, "ms") for i, ms in enumerate(result.op_ms)]
    return rows + [(result.variant, f"{what}: accuracy", result.accuracy, "fraction")]


def _prog() -> str:
    """The name the user typed: convnet (console script) or run_milestone.py."""
    name = Path(sys.argv[0]).name
    return name if name in ("convnet", "run_milestone.py") else "convnet"


def main(argv=None) -> int:
    return exit_code(_prog(), _main, argv)
