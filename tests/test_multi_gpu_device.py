"""Issue #16 on the GPU: the stream split across devices (one process per GPU) predicts every image exactly as
the single-GPU stream does, in bounded device memory per GPU. On a host with two GPUs or more the split runs
on GPUs 0 and 1; on a host with one it runs as two contexts on GPU 0 and the report says "simulated: 2
contexts on 1 GPU". The two-context run is also made where two GPUs exist."""
import re
import subprocess
import sys

import numpy as np
import pytest

from convnet import catalogue
from convnet.gpu import multi
from convnet.paths import CHECKOUT_ROOT as ROOT

pytestmark = pytest.mark.gpu

N, CHUNK = 45_000, 10_000          # 5 chunks, the last short: shares of 3 and 2 chunks


def two_devices():
    """([0, 1], False) where the host has two GPUs, else ([0, 0], True): two contexts on GPU 0."""
    return ([0, 1], False) if multi.device_count() >= 2 else ([0, 0], True)


def single_gpu_stream(v, n, chunk, lenet_weights):
    """Predictions of the single-GPU --stream path (this process's GPU 0, the three-stream pipeline)."""
    from convnet.gpu.lenet import GPULeNet
    from convnet.gpu.runtime import Runtime
    images, _ = multi.stream_images(n)
    net = GPULeNet(multi.pipelined(v, chunk), lenet_weights, Runtime.get())
    return net.forward(net.host_input(images, images), timed=False)[1]


@pytest.mark.parametrize("name", ["tc_conv1", "fused_head"])
def test_split_across_two_devices_predicts_as_one(name, lenet_weights):
    v = catalogue.get(name)
    devices, simulated = two_devices()
    want = single_gpu_stream(v, N, CHUNK, lenet_weights)
    shares = multi.run(v, N, CHUNK, devices)
    assert [(s.device, s.start, s.stop) for s in shares] == [(devices[0], 0, 30_000), (devices[1], 30_000, N)]
    got = multi.predictions(shares)
    assert got.shape == (N,) and np.array_equal(got, want)
    assert all(0 < s.device_mb < 1024 for s in shares)        # two chunks of buffers per GPU, not the share
    assert all(len(s.gpu_ms) == 1 and s.gpu_ms[0] > 0 and s.t1[0] > s.t0[0] for s in shares)
    print(f"{name}: {'simulated: 2 contexts on 1 GPU' if simulated else 'GPUs 0 and 1'} "
          f"({', '.join(s.name for s in shares)}): {N:,} predictions equal the single-GPU stream "
          f"({multi.digest(got)})")


def test_two_contexts_on_gpu0_report_says_simulated(lenet_weights):
    from convnet.stream import stream_devices
    v = catalogue.get("tc_conv1")
    want = single_gpu_stream(v, N, CHUNK, lenet_weights)
    text = stream_devices(v, N, CHUNK, [0, 0], repeat=2, single=True)
    print(text)
    assert "split across simulated: 2 contexts on 1 GPU" in text
    assert f"predictions (sha256 of the int32 classes in image order): {multi.digest(want)}" in text
    assert "predictions equal the 1-GPU run: yes" in text
    assert re.search(r"\| total +\| 2 contexts +\| 45,000 ", text)


def test_cli_devices_all_prints_the_single_gpu_digest():
    def cli(*args):
        p = subprocess.run([sys.executable, str(ROOT / "run_milestone.py"), "--variant", "tc_conv1",
                            "--stream", "30000", *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stdout
    one, split = cli(), cli("--devices", "all")
    print(one, split, sep="\n")
    digest = re.search(r"predictions \(sha256 of the int32 classes\) +\| ([0-9a-f]{16})", one).group(1)
    assert f"in image order): {digest}" in split
    assert "images/s (events)" in split and "total: " in split
