"""Which torchvision classifiers and segmentation nets the ONNX loader reads, and whether its numpy reference then
equals onnxruntime: each model (random weights, 10 classes) exported with torch.onnx, by the TorchScript exporter
(dynamo=False) or the dynamo one, at batch 2 with a dynamic batch axis; a table of what loads (and its error
against onnxruntime's CPU provider) and what is refused, with the refusal's one line. Needs torch, torchvision,
onnx, onnxruntime (and onnxscript for dynamo); no GPU.

    python tools/torchvision_zoo.py [--dynamo] [--size 160] [model ...]"""
import argparse
import re
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODELS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "densenet121",
          "googlenet", "inception_v3", "mnasnet0_5", "regnet_x_400mf", "resnext50_32x4d", "shufflenet_v2_x0_5",
          "convnext_tiny", "lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"]
SEGMENTATION = ("lraspp_", "deeplabv3_", "fcn_")     # torchvision.models.segmentation: their "out" map is exported


def build(name: str):
    """A torchvision model by name, 10 classes, random weights: a classifier, or a segmentation net returning its
    "out" map (the dict it returns otherwise does not export as one tensor)."""
    import torch
    import torchvision
    if name.startswith(SEGMENTATION):
        class Out(torch.nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model

            def forward(self, x):
                return self.model(x)["out"]
        return Out(getattr(torchvision.models.segmentation, name)(num_classes=10, weights_backbone=None,
                                                                   aux_loss=None))
    kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
    return getattr(torchvision.models, name)(num_classes=10, **kw)


def trained_like(model, seed: int = 0):
    """Batch-norm statistics and scales as training leaves them (not 0 / 1): with the defaults, some of these nets'
    random features vanish and every image gets the classifier's bias, which any loader would match."""
    import torch
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(0.1 * torch.randn(m.num_features, generator=g))
            m.running_var.copy_(0.5 + torch.rand(m.num_features, generator=g))
            m.weight.data.copy_(1 + 0.2 * torch.randn(m.num_features, generator=g))
            m.bias.data.copy_(0.1 * torch.randn(m.num_features, generator=g))
    return model.eval()


def export(model, x, path: str, dynamo: bool) -> None:
    """model at x's shape into path, the batch axis dynamic, by the dynamo exporter or the TorchScript one."""
    import torch
    kw = dict(input_names=["input"], output_names=["out"])
    with torch.no_grad():
        if dynamo:
            torch.onnx.export(model, (x,), path, dynamo=True,
                              dynamic_shapes=({0: torch.export.Dim("N", min=1, max=1024)},), **kw)
        else:
            torch.onnx.export(model, (x,), path, dynamo=False, dynamic_axes={"input": {0: "N"}, "out": {0: "N"}}, **kw)


def export_and_load(model, x, path: str, dynamo: bool):
    """(the loaded graph, None), or (None, why): the exporter's own failure or the loader's one-line refusal."""
    from convnet.cnn import graph
    from convnet.errors import UsageError
    try:
        export(model, x, path, dynamo)
    except Exception as e:                         # the exporter's own limits (e.g. adaptive pooling sizes)
        line = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).splitlines()[0][:100]     # (dynamo colours its errors)
        return None, f"export failed: {type(e).__name__}: {line}"
    try:
        return graph.load(path), None
    except UsageError as e:
        return None, f"refused: {e}"


def main(argv=None) -> int:
    import onnxruntime as ort
    import torch
    from convnet.cnn import reference
    p = argparse.ArgumentParser(prog="tools/torchvision_zoo.py")
    p.add_argument("models", nargs="*", default=MODELS)
    p.add_argument("--dynamo", action="store_true", help="the dynamo exporter (default: TorchScript's)")
    p.add_argument("--size", type=int, default=160, help="image side (inception_v3: at least 75)")
    a = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    print(f"| model | {'dynamo' if a.dynamo else 'TorchScript'} export, {a.size}x{a.size} | layers | max rel err "
          f"against onnxruntime | outputs differ between images |\n| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as d:
        for name in a.models:
            torch.manual_seed(0)
            model = trained_like(build(name))
            x = torch.randn(2, 3, a.size, a.size)
            path = f"{d}/{name}.onnx"
            g, why = export_and_load(model, x, path, a.dynamo)
            if g is None:
                print(f"| {name} | {why[:180]} | | | |")
                continue
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x.numpy()})[0]
            got = reference.forward(g, x.numpy())
            err = float(np.abs(got - want).max() / np.abs(want).max())
            varied = "yes" if np.ptp(want, axis=0).max() > 0 else "no"
            print(f"| {name} | loads | {len(g.layers)} | {err:.1e} | {varied} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
