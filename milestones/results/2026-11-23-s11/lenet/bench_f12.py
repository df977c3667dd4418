"""tc_fused12 against tc_lane_hv (and their zero-copy forms) at batch 10,000 in one process, without the PyTorch
anchors (a short device call): two rounds, the variant order reversed in the second; CUDA-event medians of
`repeat` passes after a warm-up (as convnet.gpu.lenet.run), printed per round (s11 call 4).

    python milestones/results/2026-11-23-s11/lenet/bench_f12.py [repeat] [variant ...]
    python milestones/results/2026-11-23-s11/lenet/bench_f12.py sweep [repeat]

sweep: tc_fused12's fused kernel under the warp / unit-row / blocks-per-SM settings in GRID (conv1 has 25 units
of 16 rows or 50 of 8, conv2 32 units of 8x4: 5 warps leave conv2 at 7/7/6/6/6), each checked for tc_lane_hv's
logits bit for bit (printed), tc_lane_hv timed first and last. Builds: precompile_s11.py (all without spills,
sm_90a; the 10-warp build spills and is left out)."""
import statistics
import sys

import numpy as np

from convnet import catalogue, data, weights as wio
from convnet.bench.layer import with_setting
from convnet.gpu.lenet import GPULeNet, run
from convnet.gpu.runtime import Runtime

GRID = [dict(px_warps=a, px_warp_rows=b, px_min_blocks=c)          # (5, 16, 3) is tc_fused12's own
        for a, b, c in [(5, 16, 3), (4, 16, 3), (4, 8, 3), (5, 8, 3), (8, 8, 2), (8, 16, 2), (5, 16, 2)]]


def timed(v, imgs, w, repeat):
    """(logits of an untimed pass, medians of `repeat` timed passes) of variant v on imgs."""
    net = GPULeNet(v, w, Runtime.get())
    x_host = net.host_input(None, imgs)
    z, _, _ = net.forward(x_host, timed=False)
    runs = [net.forward(x_host)[2] for _ in range(repeat)]
    return z.copy(), {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def sweep(imgs, w, repeat):
    hv = catalogue.get("tc_lane_hv")
    want, med = timed(hv, imgs, w, repeat)
    print(f"batch {len(imgs)}, {repeat} timed passes each; ms")
    print("| setting | fused kernel (op1) | forward (input on the GPU) | end to end | logits = tc_lane_hv |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| tc_lane_hv (conv1 + conv2) | {med['op1'] + med['op2']:.3f} | {med['compute']:.3f} | {med['total']:.3f} | - |",
          flush=True)
    for s in GRID:
        try:
            z, med = timed(with_setting(catalogue.get("tc_fused12"), s), imgs, w, repeat)
        except Exception as e:     # one failing setting must not hide the others
            print(f"| {s} | FAILED: {str(e)[:120]} | | | |", flush=True)
            continue
        print(f"| {' '.join(f'{k}={x}' for k, x in s.items())} | {med['op1']:.3f} | {med['compute']:.3f} | "
              f"{med['total']:.3f} | {np.array_equal(z, want)} |", flush=True)
    _, med = timed(hv, imgs, w, repeat)
    print(f"| tc_lane_hv again | {med['op1'] + med['op2']:.3f} | {med['compute']:.3f} | {med['total']:.3f} | - |")
    print(f"device: {Runtime.get().name}")


def main():
    raw = data.load_raw("test")
    imgs, labels, w = raw.images[:10000], raw.labels[:10000], wio.load()
    if sys.argv[1:2] == ["sweep"]:
        return sweep(imgs, w, int(sys.argv[2]) if len(sys.argv) > 2 else 20)
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    names = sys.argv[2:] or ["tc_lane_hv", "tc_fused12", "tc_lane_zco", "tc_fused12_zco"]
    print(f"batch {len(imgs)}, {repeat} timed passes each; ms")
    print("| round | variant | conv1 (op1) | conv2 (op2) | forward (input on the GPU) | end to end | accuracy |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for rnd, order in enumerate((names, names[::-1]), 1):
        for n in order:
            r = run(catalogue.get(n), imgs, labels, w, repeat=repeat, raw=imgs)
            t = r.extra["times"]
            print(f"| {rnd} | {n} | {r.op_ms[0]:.3f} | {r.op_ms[1]:.3f} | {t['compute']:.3f} | {r.total_ms:.3f} | "
                  f"{r.accuracy:.4f} |", flush=True)
    print(f"device: {r.device}")


if __name__ == "__main__":
    main()
