"""The decode megakernel's host side without a GPU: the argument block matches decode_mega.cu's MKArgs field for
field, the tiles and attention splits it picks stay inside the kernel's shared-memory arrays at every GPT-2 width,
batch and context, and what it cannot run is refused in one line."""
import re

import pytest

from convnet.gpt2 import model as ref
from convnet.gpt2 import megakernel as mk
from convnet.gpu.runtime import cdiv
from convnet.paths import KERNELS_DIR

WIDTHS = [(768, 12), (1024, 16), (1280, 20), (1600, 25)]


def test_argument_block_matches_the_kernel_struct():
    text = (KERNELS_DIR / mk.KERNEL_FILE).read_text()
    body = re.search(r"struct MKArgs \{(.*?)\n\};", text, re.S).group(1)
    fields = []
    for line in body.splitlines():
        decl = line.split("//")[0].strip().rstrip(";")
        if not decl:
            continue
        kind = "ptr" if "*" in decl else decl.split()[0]
        names = decl.split(None, 1)[1] if kind != "ptr" else decl.split("*", 1)[1]
        fields += [kind] * len([n for n in names.split(",") if n.strip()])
    ptrs = fields.index("int")
    ints = fields.index("float") - ptrs
    floats = len(fields) - 1 - ptrs - ints
    assert fields[-1] == "ptr" and (ptrs, ints, floats, 1) == mk.ARG_LAYOUT
    packed = mk.pack_args([1] * ptrs, [2] * ints, [3.0] * floats, 4)
    trace_at = -(-(8 * ptrs + 4 * ints + 4 * floats) // 8) * 8          # C's offset of the 8-byte trace pointer
    assert len(packed) == trace_at + 8 and packed[trace_at:] == (4).to_bytes(8, "little")
    with pytest.raises(ValueError):
        mk.pack_args([1] * (ptrs - 1), [2] * ints, [3.0] * floats, 4)


@pytest.mark.parametrize("G", [108, 114, 132, 144])
@pytest.mark.parametrize("C,H", WIDTHS)
def test_tiles_fit_the_ring_and_the_bias_rows(C, H, G):
    for N, cap in ((3 * C, None), (C, None), (4 * C, mk.MAX_FC_ROWS), (50257, None)):
        r = mk._rows(N, C, G, cap)
        assert 2 * r * C <= mk.SLOT_BYTES and (cap is None or r <= cap)
        assert cdiv(cdiv(N, r), G) * r <= mk.BIAS_ROWS or N == 50257      # (the LM head has no bias)


class _Stub:
    def __init__(self, H):
        self.gpu = type("G", (), {"H": H})()
        self.grid = 132


@pytest.mark.parametrize("C,H", WIDTHS)
@pytest.mark.parametrize("B", range(1, 9))
@pytest.mark.parametrize("cap", [1, 17, 64, 192, 513, 1024])
def test_attention_splits_stay_inside_the_kernel_arrays(C, H, B, cap):
    S, kps = mk.DecodeMegakernel.splits(_Stub(H), B, cap)
    assert S * kps >= cap and kps <= mk.KEYS and B * H * S <= mk.PARTS


def test_refusals_are_one_line():
    assert mk.model_refusal(ref.GPT2Config(12, 12, 768, 50257, 1024), "sm_90a") is None
    for config, arch, words in ((ref.GPT2Config(2, 4, 128, 100, 64), "sm_90a", "head size 64"),
                                (ref.GPT2Config(2, 32, 2048, 100, 64), "sm_90a", "up to 1600"),
                                (ref.GPT2Config(12, 12, 768, 50257, 1024), "sm_80", "Hopper")):
        why = mk.model_refusal(config, arch)
        assert words in why and "\n" not in why
    assert "1 to 8" in mk.batch_refusal(9) and mk.batch_refusal(8) is None
