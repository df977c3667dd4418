"""Issue #16, every GPU of the host, without a GPU: parsing --devices, refusing bad input in one line before
any work, splitting the stream in whole chunks, the spawned workers' orchestration (barrier, order,
CUDA_VISIBLE_DEVICES, errors) with a runner that needs no GPU, and the report's table."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from convnet.errors import GPUUnavailable, UsageError
from convnet.gpu import available, multi
from convnet.paths import CHECKOUT_ROOT as ROOT


@pytest.mark.parametrize("text,want", [("all", "all"), ("ALL", "all"), ("0", (0,)), ("0,1", (0, 1)),
                                       (" 1, 0 ", (1, 0)), ("3,0,7", (3, 0, 7))])
def test_parse_devices(text, want):
    assert multi.parse_devices(text) == want


@pytest.mark.parametrize("text,message", [("", "takes 'all' or GPU numbers"), ("x", "got 'x'"),
                                          ("-1", "got '-1'"), ("0,,1", "got '0,,1'"), ("1.5", "got '1.5'"),
                                          ("0,1,0", "names GPU 0 more than once"), ("2,2", "GPU 2 more than once")])
def test_parse_devices_refuses(text, message):
    with pytest.raises(UsageError, match=message):
        multi.parse_devices(text)


def test_resolve_devices_against_the_host():
    assert multi.resolve_devices("all", count=2) == [0, 1]
    assert multi.resolve_devices("all", count=1) == [0]
    assert multi.resolve_devices((1, 0), count=2) == [1, 0]
    with pytest.raises(UsageError, match="there is no GPU 2; this host has GPUs 0..1"):
        multi.resolve_devices("0,2", count=2)
    with pytest.raises(UsageError, match="there is no GPU 1; this host has GPU 0$"):
        multi.resolve_devices((1,), count=1)


@pytest.mark.skipif(available()[0], reason="this host has a GPU")
def test_resolve_devices_without_a_gpu_names_the_reason():
    with pytest.raises(GPUUnavailable, match="--devices needs a GPU: " + available()[1][:20]):
        multi.resolve_devices("all")


@pytest.mark.parametrize("n,chunk,k", [(1_000_000, 10_000, 2), (45_000, 10_000, 2), (45_000, 10_000, 3),
                                       (10_000, 10_000, 2), (7, 3, 4), (1, 10_000, 2), (99_999, 1000, 8),
                                       (30_000, 10_000, 1)])
def test_split_whole_chunks_contiguous_and_balanced(n, chunk, k):
    shares = multi.split(n, chunk, k)
    assert len(shares) == k and shares[0][0] == 0 and shares[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(shares, shares[1:]))          # contiguous, in order
    assert all(s0 % chunk == 0 for s0, s1 in shares if s1 > s0)           # the single-GPU chunk boundaries
    counts = [-(-(s1 - s0) // chunk) for s0, s1 in shares]
    assert sum(counts) == -(-n // chunk) and max(counts) - min(counts) <= 1
    assert all(s1 - s0 == c * chunk for (s0, s1), c in zip(shares, counts) if s1 != n)   # whole chunks


def test_split_examples():
    assert multi.split(1_000_000, 10_000, 2) == [(0, 500_000), (500_000, 1_000_000)]
    assert multi.split(45_000, 10_000, 2) == [(0, 30_000), (30_000, 45_000)]
    assert multi.split(10_000, 10_000, 2) == [(0, 10_000), (10_000, 10_000)]   # one chunk: the second GPU idles


def test_stream_images_repeat_the_test_set():
    from convnet import data
    raw = data.load_raw("test")
    images, labels = multi.stream_images((9_998, 10_003))
    assert np.array_equal(images, raw.images[[9998, 9999, 0, 1, 2]])
    assert np.array_equal(labels, raw.labels[[9998, 9999, 0, 1, 2]])


# -- the orchestration, with runners spawned processes can import (this module) and that need no GPU --------

def fake_runner(job, ready):
    """Predicts (7 i + 3) % 10 for image i; says which GPU it saw through its name."""
    s0, s1 = job["share"]
    if job["variant"] == "fail" and job["device"] == 1:
        raise UsageError("boom")
    if job["variant"] == "crash" and job["device"] == 1:
        os._exit(3)
    out = {"name": f"fake visible={os.environ['CUDA_VISIBLE_DEVICES']}", "gpu_ms": [], "t0": [], "t1": [],
           "device_mb": 1.5}
    for _ in range(job["repeat"]):
        ready()
        out["t0"].append(time.monotonic())
        time.sleep(0.01)
        out["gpu_ms"].append(10.0)
        out["t1"].append(time.monotonic())
    out["predictions"] = ((np.arange(s0, s1) * 7 + 3) % 10).astype(np.int32)
    return out


def test_run_joins_the_shares_in_image_order(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    shares = multi.run("ok", 25, 4, [1, 0, 2], repeat=2, runner=fake_runner)
    assert [(s.device, s.start, s.stop) for s in shares] == [(1, 0, 12), (0, 12, 20), (2, 20, 25)]
    assert [s.name for s in shares] == ["fake visible=1", "fake visible=0", "fake visible=2"]
    assert np.array_equal(multi.predictions(shares), (np.arange(25) * 7 + 3) % 10)
    for r in range(2):                     # the barrier: every pass starts after every worker is ready
        assert max(s.t0[r] for s in shares) < min(s.t1[r] for s in shares)
    assert os.environ.get("CUDA_VISIBLE_DEVICES") is None


def test_run_maps_through_the_parents_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    shares = multi.run("ok", 8, 4, [1, 0], runner=fake_runner)
    assert [s.name for s in shares] == ["fake visible=5", "fake visible=3"]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3,5"


def test_run_two_contexts_on_one_gpu_and_an_idle_device():
    shares = multi.run("ok", 3, 4, [0, 0], runner=fake_runner)
    assert [(s.start, s.stop) for s in shares] == [(0, 3), (3, 3)] and shares[1].predictions is None
    assert multi.simulated([0, 0]) and not multi.simulated([0, 1])
    assert np.array_equal(multi.predictions(shares), [3, 0, 7])


@pytest.mark.parametrize("variant,error,message", [("fail", UsageError, "GPU 1: boom"),
                                                    ("crash", Exception, "GPU 1: the process for GPU 1 exited with code 3")])
def test_a_failing_worker_stops_the_run_with_its_one_line(variant, error, message):
    t0 = time.monotonic()
    with pytest.raises(error, match=message):
        multi.run(variant, 20, 5, [0, 1, 2], runner=fake_runner)
    assert time.monotonic() - t0 < 60        # the other workers left the barrier instead of waiting for GPU 1


def test_digest_is_of_the_classes_not_their_dtype():
    a = np.array([1, 2, 3], np.int32)
    assert multi.digest(a) == multi.digest(a.astype(np.int64)) != multi.digest(np.array([1, 2, 4]))
    assert len(multi.digest(a)) == 16


def test_report_table_per_gpu_total_and_simulated(monkeypatch):
    from convnet import catalogue
    from convnet import stream as bench_stream

    def fake_run(variant, n, chunk, devices, weights_path=None, data_dir=None, repeat=1):
        shares = [multi.Share(d, a, b) for d, (a, b) in zip(devices, multi.split(n, chunk, len(devices)))]
        for i, s in enumerate(shares):
            s.name, s.device_mb, s.gpu_ms = "Fake GPU", 339.0, [50.0 * (i + 1)] * repeat
            s.t0, s.t1 = [10.0 + i * 0.001] * repeat, [10.1] * repeat
            s.predictions = multi.stream_images((s.start, s.stop))[1].astype(np.int32)   # the labels
        return shares
    monkeypatch.setattr(multi, "run", fake_run)
    text = bench_stream.stream_devices(catalogue.get("tc_conv1"), 1_000_000, 10_000, [0, 0], repeat=3, single=True)
    lines = text.splitlines()
    assert "split across simulated: 2 contexts on 1 GPU (Fake GPU), median of 3 passes" in lines[0]
    gpu0 = next(ln for ln in lines if ln.startswith("| GPU 0"))
    assert "500,000" in gpu0 and "50 x 10,000" in gpu0 and "10,000,000" in gpu0 and "1.0000" in gpu0
    total = next(ln for ln in lines if ln.startswith("| total"))
    assert "| 2 contexts " in total and "1,000,000" in total and "15,000,000 (sum)" in total and "100.0" in total and "678" in total
    assert "total: 10,000,000 images/s" in text
    assert "predictions equal the 1-GPU run: yes" in text and "2 devices: 1.00x" in text
    plain = bench_stream.stream_devices(catalogue.get("tc_conv1"), 30_000, 10_000, [0, 1])
    assert "split across 2 GPUs (Fake GPU), one pass" in plain and "1 GPU (" not in plain
    # --json: the same figures as the table
    rec = {}
    again = bench_stream.stream_devices(catalogue.get("tc_conv1"), 1_000_000, 10_000, [0, 0], repeat=3, single=True,
                                        record=rec)
    assert again == text
    assert rec["variant"] == "tc_conv1" and rec["images"] == 1_000_000 and rec["simulated"] is True
    assert [d["images"] for d in rec["devices"]] == [500_000, 500_000]
    assert rec["devices"][0]["images_per_s_events"] == pytest.approx(10_000_000)
    assert rec["images_per_s"] == pytest.approx(10_000_000) and rec["accuracy"] == 1.0
    assert rec["digest"] in text and rec["single"]["predictions_equal"] is True
    assert rec["single"]["speedup"] == pytest.approx(1.0)
    json.dumps(rec)                        # every value serialisable


def run_cli(*args):
    return subprocess.run([sys.executable, str(ROOT / "run_milestone.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("args,message", [
    (["--devices", "0,1"], "--devices needs --stream"),
    (["--variant", "cpu", "--devices", "all"], "--devices needs --stream"),
    (["--stream", "100", "--devices", "0,0"], "argument --devices: names GPU 0 more than once"),
    (["--stream", "100", "--devices", "zero"], "argument --devices: takes 'all' or GPU numbers"),
    (["--stream", "100", "--devices", "0,-1"], "argument --devices: takes 'all' or GPU numbers"),
    (["--model", "gpt2", "--stream", "5", "--devices", "all"], "--model gpt2 lists GPT-2's variants"),
    (["--stream", "100", "--devices", "99"],
     "there is no GPU 99" if available()[0] else "--devices needs a GPU: "),
])
def test_bad_devices_give_one_line_and_exit_2(args, message):
    p = run_cli(*args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr


def test_stream_predictions_is_refused_before_any_work():
    p = run_cli("--stream", "100", "--json", "/tmp/x.json", "--predictions")
    assert p.returncode == 2 and "--predictions does not apply to --stream" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(available()[0], reason="this host has a GPU")
def test_devices_without_a_gpu_say_why_like_every_gpu_option():
    p = run_cli("--stream", "100", "--devices", "all")
    assert p.returncode == 2 and p.stderr.strip() == f"run_milestone.py: error: --devices needs a GPU: {available()[1]}"


def pipeline_runtime():
    """A recording runtime (no GPU) with the streams, events (2.5 ms apart), pinned buffers and pool size the
    pipelined GPULeNet asks for."""
    from convnet.gpu.recorder import RecordingRuntime, _Pool

    class Event:
        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

        def time_since(self, other):
            return 2.5

    class Stream:
        def wait_for_event(self, ev):
            pass

    class Pool(_Pool):
        bytes_in_use = 339 << 20

    class Rt(RecordingRuntime):
        def __init__(self):
            super().__init__()
            self.pool, self.forwards = Pool(), []

        def stream(self):
            return Stream()

        def event(self):
            return Event()

        def pinned(self, shape, dtype):
            return np.zeros(shape, dtype)

    return Rt()


def test_run_share_drives_the_pipeline_in_one_process(monkeypatch):
    """run_share (what each spawned process runs) through a recording runtime: its share's images pinned,
    one warm-up of at most three chunks (GPULeNet.forward), then `repeat` passes each after ready(), each
    the whole share through the pipeline into result arrays pinned once before the first pass (no host
    allocation inside a timed pass), every image predicted."""
    from convnet import catalogue
    from convnet.gpu import lenet, runtime
    rt = pipeline_runtime()
    monkeypatch.setattr(runtime.Runtime, "get", classmethod(lambda cls: rt))
    real_forward, real_pipelined, pinned, results = lenet.GPULeNet.forward, lenet.GPULeNet._pipelined, [], []
    real_pinned = rt.pinned

    def forward(self, x_host, timed=True):
        rt.forwards.append(("forward", len(x_host), x_host[:1].copy(), int(self.variant.params["pipeline_chunk"])))
        return real_forward(self, x_host, timed)

    def piped(self, x_host, logits, pred, chunk, timed):
        rt.forwards.append(("pass", len(x_host), x_host[:1].copy(), chunk))
        results.append((logits, pred))
        assert not timed and logits.shape == (len(x_host), 10) and pred.shape == (len(x_host),)
        return real_pipelined(self, x_host, logits, pred, chunk, timed)

    def pin(shape, dtype):
        pinned.append((len(rt.forwards), shape))
        return real_pinned(shape, dtype)
    monkeypatch.setattr(lenet.GPULeNet, "forward", forward)
    monkeypatch.setattr(lenet.GPULeNet, "_pipelined", piped)
    monkeypatch.setattr(rt, "pinned", pin)
    waits = []
    job = {"variant": catalogue.get("tc_conv1"), "share": (20_000, 45_000), "chunk": 5000, "repeat": 3,
           "device": 1, "visible": "1"}
    out = multi.run_share(job, lambda: waits.append(len(rt.forwards)))
    images, _ = multi.stream_images((20_000, 45_000))
    assert [(k, n, c) for k, n, _, c in rt.forwards] == \
        [("forward", 15_000, 5000), ("pass", 15_000, 5000)] + [("pass", 25_000, 5000)] * 3
    assert all(np.array_equal(first[0], images[0]) for _, _, first, _ in rt.forwards)
    assert waits == [2, 3, 4]                       # each timed pass after the barrier
    assert all(z is results[1][0] and p is results[1][1] for z, p in results[2:])   # (results[0]: the warm-up)
    # every timed pass writes the same result arrays ...
    assert max(at for at, _ in pinned) <= 2         # ... pinned before the first timed pass
    assert out["predictions"].shape == (25_000,) and out["gpu_ms"] == [2.5] * 3 and out["device_mb"] == 339
    assert out["name"] == "no device (dry run)" and all(b >= a for a, b in zip(out["t0"], out["t1"]))


def test_single_gpu_stream_record_matches_its_table(monkeypatch):
    """--stream N --json on one GPU: stream() through the recording runtime fills the record with the table's
    figures (images, GPU time by events, accuracy, digest)."""
    from convnet import catalogue
    from convnet import stream as bench_stream
    from convnet.gpu import runtime
    rt = pipeline_runtime()
    monkeypatch.setattr(runtime.Runtime, "get", classmethod(lambda cls: rt))
    rec = {}
    text = bench_stream.stream(catalogue.get("tc_conv1"), 25_000, 5000, record=rec)
    assert rec["variant"] == "tc_conv1" and rec["images"] == 25_000 and rec["chunk"] == 5000
    dev = rec["devices"][0]
    assert f"{dev['gpu_ms']:.1f} ms" in text and f"{dev['images_per_s_events']:,.0f} images/s" in text
    assert f"{rec['accuracy']:.4f}" in text and rec["digest"] in text and dev["device_mb"] == 339
    json.dumps(rec)
