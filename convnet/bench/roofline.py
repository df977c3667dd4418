"""The roofline of a LeNet-86 variant: per stage of the GPU pipeline, time (measured), bytes moved and
FLOPs (counted from the shapes: what each stage's kernels must read, write and compute, at the variant's
storage width), achieved GB/s and GFLOP/s, and their fraction of the device's measured ceilings (a large
device-to-device copy; an SGEMM for SIMT stages, an fp16 tensor-core GEMM for stages whose strategy is
`mma`, issue #16). `run_milestone.py --variant X --roofline [--plot out.png]`.

Counting rules: every input and output tensor crosses DRAM once (weights too; they are small); a
convolution computes 2 FLOPs per multiply-add over the outputs its kernel produces (with a fused pool
only the rows and columns a window reaches); ReLU + max-pool is one operation per input element.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import report
from ..gpu.conv import TENSOR_CORE_STRATEGIES


@dataclass
class Stage:
    name: str
    bytes: float
    flops: float
    ms: float = 0.0
    tensor_cores: bool = False      # measured against the fp16 tensor-core ceiling

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


def stage_costs(variant, n: int) -> list[Stage]:
    """Bytes and FLOPs per stage of LeNet-86 at batch n under the variant's storage and fusion."""
    a = 2 if variant.precision == "fp16" else 4                 # activation storage bytes
    fused = bool(variant.params.get("fuse_pool"))
    head = variant.params.get("fc") == "fused"                  # h stays on chip
    x, y1, p1 = n * 86 * 86, n * 4 * 80 * 80, n * 4 * 40 * 40
    y2, p2 = n * 16 * 34 * 34, n * 16 * 8 * 8
    w1, w2, fc_w = 4 * 49, 16 * 4 * 49, 1024 * 128 + 128 + 128 * 10 + 10
    stages = []
    x_in = n * 28 * 28 if variant.params.get("fuse_upscale") else a * x     # uint8 images, resized in conv1
    if fused:                      # conv + ReLU + pool in one kernel: only the pooled map is written
        stages.append(Stage("conv1", x_in + 4 * w1 + a * p1, 2 * 49 * n * 4 * 80 * 80 + y1))
        stages.append(Stage("pool1", 0, 0))
        # conv2's pool (4, floor) reaches rows/columns 0..31 of 34: the kernel computes 32 x 32 outputs
        stages.append(Stage("conv2", a * p1 + 4 * w2 + 4 * p2, 2 * 196 * n * 16 * 32 * 32 + n * 16 * 32 * 32))
        stages.append(Stage("pool2", 0, 0))
    else:
        stages.append(Stage("conv1", a * x + 4 * w1 + a * y1, 2 * 49 * y1))
        stages.append(Stage("pool1", a * y1 + a * p1, y1))
        stages.append(Stage("conv2", a * p1 + 4 * w2 + a * y2, 2 * 196 * y2))
        stages.append(Stage("pool2", a * y2 + 4 * p2, y2))
    # FC1 (+bias, ReLU), FC2 (+bias), argmax: p2 in, h (unless fused) and logits through memory, predictions out
    h_bytes = 0 if head else 2 * 4 * n * 128
    z_bytes = 4 * n * 10 if head else 2 * 4 * n * 10
    stages.append(Stage("fc", 4 * p2 + 4 * fc_w + h_bytes + z_bytes + 4 * n,
                        2 * n * (1024 * 128 + 128 * 10)))
    for st in stages:
        if st.name in ("conv1", "conv2"):
            st.tensor_cores = variant.params.get(f"{st.name}_strategy", variant.strategy) in TENSOR_CORE_STRATEGIES
    return stages


def compute_ceiling(stage: Stage, ceilings: dict) -> tuple[float, str]:
    """(GFLOP/s, name) of the compute ceiling a stage is measured against."""
    if stage.tensor_cores and ceilings.get("tc_f16_gflops"):
        return ceilings["tc_f16_gflops"], "fp16 TC"
    return ceilings["sgemm_gflops"], "SGEMM"


def table(stages: list[Stage], ceilings: dict, title: str) -> str:
    """ceilings: {"copy_gbs": GB/s of a device-to-device copy (read + write), "sgemm_gflops": GFLOP/s,
    optionally "tc_f16_gflops": the fp16 tensor-core GEMM's GFLOP/s}."""
    rows = []
    for s in stages:
        if s.bytes == 0 and s.flops == 0:
            rows.append([s.name, s.ms, "-", "-", "-", "-", "-", "-", "fused into the conv"])
            continue
        peak, peak_name = compute_ceiling(s, ceilings)
        ridge = peak / ceilings["copy_gbs"]
        gbs = s.bytes / (s.ms * 1e6) if s.ms else 0.0
        gflops = s.flops / (s.ms * 1e6) if s.ms else 0.0
        bound = "memory" if s.intensity < ridge else "compute"
        rows.append([s.name, s.ms, s.bytes / 1e6, s.flops / 1e9, gbs, gflops,
                     f"{100 * gbs / ceilings['copy_gbs']:.0f}%", f"{100 * gflops / peak:.0f}% of {peak_name}",
                     f"{bound} (I = {s.intensity:.1f} FLOP/B, ridge {ridge:.1f})"])
    tc = (f", fp16 tensor cores {ceilings['tc_f16_gflops'] / 1e3:.1f} TFLOP/s" if ceilings.get("tc_f16_gflops")
          else "")
    return report.table(["stage", "ms", "MB moved", "GFLOP", "GB/s", "GFLOP/s", "of copy BW", "of compute",
                         "bound by"],
                        rows, title=title + f"; ceilings: copy {ceilings['copy_gbs']:.0f} GB/s, "
                                            f"SGEMM {ceilings['sgemm_gflops'] / 1e3:.1f} TFLOP/s" + tc)


def plot(stages: list[Stage], ceilings: dict, title: str, out_path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from ..errors import UsageError
        raise UsageError("the roofline plot needs matplotlib (pip install -e '.[plot]')") from None
    bw, peak = ceilings["copy_gbs"], ceilings["sgemm_gflops"]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    xs = sorted([2 ** e for e in range(-6, 12)] + [peak / bw])     # the ridge itself: a sharp corner
    ax.plot(xs, [min(peak, bw * x) for x in xs], color="black", lw=1.5, label="roofline (copy BW, SGEMM)")
    tc = ceilings.get("tc_f16_gflops")
    if tc:
        xt = sorted([2 ** e for e in range(-6, 12)] + [tc / bw])
        ax.plot(xt, [min(tc, bw * x) for x in xt], color="tab:red", lw=1.2, ls="--",
                label="roofline (copy BW, fp16 tensor cores)")
    for s in stages:
        if s.ms and s.flops:
            ax.scatter([s.intensity], [s.flops / (s.ms * 1e6)], s=40, zorder=3)
            ax.annotate(s.name + (" (TC)" if s.tensor_cores else ""), (s.intensity, s.flops / (s.ms * 1e6)), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)


def for_run(v, result, batch: int, plot_path=None) -> str:
    """The roofline table of one measured run (`run_milestone.py --roofline`), against this device's cached
    ceilings; with plot_path, also drawn into that PNG."""
    from ..gpu.runtime import Runtime
    from . import ceilings
    stages = stage_costs(v, batch)
    for s in stages:
        s.ms = result.extra["times"][s.name]
    c = ceilings.get(Runtime.get())
    title = f"LeNet-86 {v.name}, batch {batch}, {result.device}"
    text = table(stages, c, title)
    if plot_path:
        plot(stages, c, title, plot_path)
        text += f"\nroofline plot written to {plot_path}"
    return text
