"""`run_milestone.py --compare`: several LeNet-86 variants in one process, one table, and the anchors
timed in the same run (cuDNN on the same conv layers, PyTorch's whole forward, when torch imports)."""
from __future__ import annotations

from tqdm import tqdm

from .. import catalogue, report
from ..errors import GPUError
from ..runner import resolve_variant, run_variant


def compare(names, x, labels, weights, repeat, raw=None) -> tuple[str, list]:
    if not names:
        names = [v.name for v in catalogue.load_all().values() if v.needs_gpu]
    variants = [resolve_variant(n) for n in names]
    results, failed = [], []
    for v in tqdm(variants, desc="variants", unit="variant", leave=False):
        try:
            results.append(run_variant(v, x, labels, weights, repeat, raw))
        except GPUError as e:          # one broken variant must not hide the others' figures
            failed.append(f"{v.name}: FAILED: {e}")
    if not results:
        raise GPUError("every variant failed:\n" + "\n".join(failed))
    base = next((r for r in results if r.variant == "baseline"), None)
    rows = []
    for r in results:
        speedup = f"{base.total_ms / r.total_ms:.2f}x" if base else "-"
        overlap = f"{r.extra['overlap']:.2f}" if "overlap" in r.extra else "-"
        rows.append([r.variant, r.op_ms[0], r.op_ms[1], r.total_ms, f"{r.accuracy:.4f}", speedup, overlap])
    text = report.table(["variant", "Op Time 1 (ms)", "Op Time 2 (ms)", "Total (ms)", "Accuracy",
                         "speedup vs baseline", "overlap"], rows,
                        title=f"batch {len(x)} on {results[0].device}")
    return "\n".join([text + anchor_lines(results, x, weights, raw), *failed]), results


def anchor_lines(results, x, weights, raw=None) -> str:
    """cuDNN (through PyTorch, when importable) on the same two conv layers and PyTorch's whole forward,
    timed in this run, against the fastest GPU variant among `results`."""
    if not any(r.extra.get("gpu") for r in results):
        return ""
    from .torch_anchor import time_cudnn, time_torch_lenet, time_torch_lenet_fp16
    anchor = time_cudnn(x, weights)
    if anchor is None:
        return "\n(PyTorch not importable: no cuDNN comparison)"
    gpu = [r for r in results if r.extra.get("gpu")]
    best1 = min(r.op_ms[0] for r in gpu)
    best2 = min(r.op_ms[1] for r in gpu)
    text = (f"\ncuDNN (PyTorch {anchor['torch']}) same layers, same run: conv1 {anchor['conv1_ms']:.3f} ms, "
            f"conv2 {anchor['conv2_ms']:.3f} ms; best here is {anchor['conv1_ms'] / best1:.2f}x / "
            f"{anchor['conv2_ms'] / best2:.2f}x faster")
    whole = time_torch_lenet(x, weights)
    fastest = min(gpu, key=lambda r: r.extra["times"]["compute"])
    ours = fastest.extra["times"]["compute"]
    text += (f"\nWhole forward, input already on the GPU: {fastest.variant} {ours:.3f} ms (kernels from the "
             f"uploaded batch to the predictions); PyTorch eager {whole['eager_ms']:.3f} ms "
             f"({whole['eager_ms'] / ours:.1f}x slower)")
    if "compile_ms" in whole:
        text += f", torch.compile {whole['compile_ms']:.3f} ms ({whole['compile_ms'] / ours:.1f}x slower)"
    elif "compile_error" in whole:
        text += f", torch.compile failed here: {whole['compile_error']}"
    try:                        # an anchor that fails must not hide the table above it
        fp16 = time_torch_lenet_fp16(raw, weights) if raw is not None else None
    except Exception as e:
        fp16 = {"fp16_error": f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"}
    if fp16 and "fp16_ms" in fp16:
        e2e = min(gpu, key=lambda r: r.total_ms)
        text += (f"\nPyTorch fp16 channels_last torch.compile from the uint8 pictures, same run: forward "
                 f"{fp16['fp16_ms']:.3f} ms ({fp16['fp16_ms'] / ours:.1f}x {fastest.variant}), end to end from "
                 f"pinned host memory {fp16['fp16_e2e_ms']:.3f} ms ({fp16['fp16_e2e_ms'] / e2e.total_ms:.1f}x "
                 f"{e2e.variant}'s {e2e.total_ms:.3f} ms)")
    elif fp16:
        text += f"\nPyTorch fp16 torch.compile failed here: {fp16['fp16_error']}"
    return text
