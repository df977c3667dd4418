"""The roofline's counting model and its presentation (CPU: the GPU part is the timing it is fed)."""
import dataclasses

import pytest

from convnet import catalogue
from convnet.bench import roofline


def test_unfused_fp32_costs_count_every_tensor_once():
    v = catalogue.get("fused")                    # separate ReLU + pool kernels, fp32
    s = {st.name: st for st in roofline.stage_costs(v, 10)}
    assert s["conv1"].bytes == 4 * (10 * 86 * 86 + 4 * 49 + 10 * 4 * 80 * 80)
    assert s["conv1"].flops == 2 * 49 * 10 * 4 * 80 * 80
    assert s["pool1"].bytes == 4 * (10 * 4 * 80 * 80 + 10 * 4 * 40 * 40)
    assert s["conv2"].flops == 2 * 4 * 49 * 10 * 16 * 34 * 34
    assert s["fc"].flops == 2 * 10 * (1024 * 128 + 128 * 10)


def test_fused_pool_and_fp16_change_the_counts():
    fp32 = {st.name: st for st in roofline.stage_costs(catalogue.get("fused_pool"), 10)}
    assert fp32["pool1"].bytes == 0 and fp32["pool1"].flops == 0          # inside the conv kernel
    assert fp32["conv2"].flops == 2 * 196 * 10 * 16 * 32 * 32 + 10 * 16 * 32 * 32
    half = {st.name: st for st in roofline.stage_costs(catalogue.get("op_5"), 10)}
    full = {st.name: st for st in roofline.stage_costs(dataclasses.replace(catalogue.get("op_5"), precision="fp32"), 10)}
    assert half["pool1"].bytes == full["pool1"].bytes / 2


def test_table_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    stages = roofline.stage_costs(catalogue.get("fused_pool"), 10000)
    for st, ms in zip(stages, (1.0, 0.0, 1.5, 0.0, 0.3)):
        st.ms = ms
    ceilings = {"copy_gbs": 4000.0, "sgemm_gflops": 50000.0}
    text = roofline.table(stages, ceilings, "test")
    conv1 = next(line for line in text.splitlines() if line.startswith("| conv1"))
    assert "compute (I = " in conv1 or "memory (I = " in conv1
    assert "fused into the conv" in text and "ridge 12.5" in text
    out = tmp_path / "roof.png"
    roofline.plot(stages, ceilings, "test", str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tensor_core_stages_use_the_fp16_ceiling():
    """Issue #16: tc_fused's conv2 runs on tensor cores, so its percentage is of the fp16 GEMM ceiling;
    conv1 (SIMT) and the FC head stay against SGEMM; without a measured fp16 ceiling SGEMM is used."""
    stages = roofline.stage_costs(catalogue.get("tc_fused"), 10000)
    by = {st.name: st for st in stages}
    assert by["conv2"].tensor_cores and not by["conv1"].tensor_cores and not by["fc"].tensor_cores
    assert all(st.tensor_cores for st in roofline.stage_costs(catalogue.get("op_5_tc"), 10) if "conv" in st.name)
    for st, ms in zip(stages, (1.0, 0.0, 0.5, 0.0, 0.2)):
        st.ms = ms
    ceilings = {"copy_gbs": 4000.0, "sgemm_gflops": 50000.0, "tc_f16_gflops": 800000.0}
    text = roofline.table(stages, ceilings, "test")
    conv2 = next(line for line in text.splitlines() if line.startswith("| conv2"))
    pct = 100 * by["conv2"].flops / (0.5 * 1e6) / 800000.0
    assert f"{pct:.0f}% of fp16 TC" in conv2 and "ridge 200.0" in conv2
    assert "of SGEMM" in next(line for line in text.splitlines() if line.startswith("| conv1"))
    assert "fp16 tensor cores 800.0 TFLOP/s" in text
    del ceilings["tc_f16_gflops"]
    assert "of SGEMM" in next(line for line in roofline.table(stages, ceilings, "t").splitlines()
                              if line.startswith("| conv2"))
