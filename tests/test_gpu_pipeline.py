"""Issue #16 on the GPU: the three-stream pipeline gives the same logits and predictions, bit for bit, as
the batch in one piece (chunks that do not divide the batch, both buffer slots reused), with the
activations of both slots poisoned before the run; and the streamed path stays within its memory."""
import dataclasses

import numpy as np
import pytest

from convnet import catalogue

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", ["tc_pipe", "fused_head", "fused"])
def test_pipelined_forward_equals_one_piece(name, lenet_weights):
    from convnet import data
    from convnet.gpu.lenet import GPULeNet
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    x, _ = data.load("test", limit=2300)
    raw = data.load_raw("test").images[:2300]
    v = catalogue.get(name)
    whole = GPULeNet(dataclasses.replace(v, params={k: p for k, p in v.params.items() if k != "pipeline_chunk"}),
                     lenet_weights, rt)
    want_logits, want_pred, _ = whole.forward(whole.host_input(x, raw), timed=False)
    piped = GPULeNet(dataclasses.replace(v, params={**v.params, "pipeline_chunk": 700}), lenet_weights, rt)
    x_host = piped.host_input(x, raw)
    piped.forward(x_host, timed=False)                       # allocates both slots
    for slot in (0, 1):                                      # NaN through the host (no float16 fill)
        for name, buf in piped._buffers(slot, 700).items():
            if buf.dtype.kind == "f":
                buf.set(np.full(buf.shape, np.nan, buf.dtype))
    logits, pred, times = piped.forward(x_host, timed=True)
    assert np.array_equal(pred, want_pred)
    assert np.array_equal(logits, want_logits)
    assert times["total"] > 0 and times["compute"] > 0 and times["upload"] > 0
