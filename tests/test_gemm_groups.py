"""convnet.bench.gemm_groups' table (per-call times, TFLOP/s, the share of the faster cuBLAS anchor, the forward's GEMM
sum) and its refusal of an unknown variant (CPU)."""
from convnet.bench import gemm_groups
from convnet.bench.autotune import gpt2_shapes


def test_table_ratios_against_the_faster_anchor():
    shapes = gpt2_shapes(8, 1024)
    mine = {"a": {"qkv": 0.05, "attn_proj": 0.04, "mlp_fc": 0.06, "mlp_proj": 0.08, "lm_head": 1.0},
            "b": {"qkv": 0.06, "attn_proj": 0.04, "mlp_fc": 0.07, "mlp_proj": 0.07, "lm_head": 1.1}}
    anchor = {"qkv": {"torch.addmm bf16": 0.045}, "attn_proj": {"torch.addmm bf16": 0.02, "cuBLAS GemmEx fp32 C +=": 0.03},
              "mlp_fc": {}, "mlp_proj": {"torch.addmm bf16": 0.06, "cuBLAS GemmEx fp32 C +=": 0.05},
              "lm_head": {"torch.addmm bf16": 0.9}}
    text = gemm_groups.table(mine, anchor, shapes, "GPU", 8, 1024)
    lines = {ln.split("|")[1].strip().split(" ")[0]: [c.strip() for c in ln.split("|")[1:-1]]
             for ln in text.splitlines() if ln.startswith("| ") and "(" in ln.split("|")[1]}
    assert lines["qkv"][1:3] == ["50.0", "60.0"] and lines["qkv"][-1] == "90 %"
    assert lines["attn_proj"][-1] == "50 %"                  # the faster anchor (addmm, 20 us) over ours (40 us)
    assert lines["mlp_proj"][-1] == "62 %" and lines["mlp_fc"][-1] == "-"
    M, N, K = shapes["lm_head"]
    assert lines["lm_head"][-2] == f"{2 * M * N * K / 1e9:.0f}"
    a_sum = 12 * (0.05 + 0.04 + 0.06 + 0.08) + 1.0
    assert f"a {a_sum:.3f} ms" in text.splitlines()[0]


def test_unknown_variant_refused_in_one_line(capsys):
    assert gemm_groups.main(["--variants", "no_such_variant"]) == 2
    err = capsys.readouterr().err
    assert "unknown gpt2 variant 'no_such_variant'" in err and len(err.strip().splitlines()) == 1


def test_a_spec_with_an_unknown_param_is_refused_in_one_line(capsys):
    """--variants takes NAME@KEY=V specs as the other benchmarks do; a param GPT-2 does not know is one line, exit 2,
    before any GPU work."""
    assert gemm_groups.main(["--variants", "fast_bf16", "fast_bf16@no_such_param=1"]) == 2
    err = capsys.readouterr().err
    assert "no_such_param" in err and len(err.strip().splitlines()) == 1


def test_record_rows_name_each_group_and_anchor():
    """--record's rows: ours and each anchor, a group each, in microseconds a call, the group's shape in the benchmark."""
    shapes = gpt2_shapes(8, 1024)
    mine = {g: 0.05 for g in shapes}
    anchor = {g: ({"torch.addmm bf16": 0.04, "cuBLAS GemmEx fp32 C +=": 0.045} if g in gemm_groups.RESIDUAL_GROUPS
                  else {"torch.addmm bf16": 0.04}) for g in shapes}
    rows = gemm_groups.record_rows({"fast_bf16": mine}, anchor, shapes, 8, 1024)
    assert len(rows) == 2 * len(shapes) + len(gemm_groups.RESIDUAL_GROUPS)
    M, N, K = shapes["attn_proj"]
    attn = [r for r in rows if f"attn_proj ({M} x {N} x {K})" in r[1]]
    assert [(r[0], r[2], r[3]) for r in attn] == [("fast_bf16", 50.0, "us"), ("torch_addmm_bf16", 40.0, "us"),
                                                  ("cublas_gemmex_fp32_accumulate", 45.0, "us")]


def test_record_refuses_a_table_that_is_not_one_before_any_gpu_work(tmp_path, capsys):
    bad = tmp_path / "t.csv"
    bad.write_text("not,a,results,table\n")
    assert gemm_groups.main(["--variants", "fast_bf16", "--record", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a results table" in err and len(err.strip().splitlines()) == 1
