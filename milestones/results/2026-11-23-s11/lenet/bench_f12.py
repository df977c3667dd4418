"""tc_fused12 against tc_lane_hv (and their zero-copy forms) at batch 10,000 in one process, without the PyTorch
anchors (a short device call): two rounds, the variant order reversed in the second; CUDA-event medians of
`repeat` passes after a warm-up (convnet.gpu.lenet.run), printed per round.

    python milestones/results/2026-11-23-s11/lenet/bench_f12.py [repeat] [variant ...]"""
import sys

from convnet import catalogue, data, weights as wio
from convnet.gpu.lenet import run

repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 20
names = sys.argv[2:] or ["tc_lane_hv", "tc_fused12", "tc_lane_zco", "tc_fused12_zco"]
raw = data.load_raw("test")
imgs, labels, w = raw.images[:10000], raw.labels[:10000], wio.load()
print(f"batch {len(imgs)}, {repeat} timed passes each; ms")
print("| round | variant | conv1 (op1) | conv2 (op2) | forward (input on the GPU) | end to end | accuracy |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for rnd, order in enumerate((names, names[::-1]), 1):
    for n in order:
        r = run(catalogue.get(n), imgs, labels, w, repeat=repeat, raw=imgs)
        t = r.extra["times"]
        print(f"| {rnd} | {n} | {r.op_ms[0]:.3f} | {r.op_ms[1]:.3f} | {t['compute']:.3f} | {r.total_ms:.3f} | {r.accuracy:.4f} |",
              flush=True)
print(f"device: {r.device}")
