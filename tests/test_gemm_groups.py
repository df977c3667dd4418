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
