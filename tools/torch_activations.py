"""Which of PyTorch's activations the ONNX loader reads as torch exports them: a small net per activation (two
convolutions with a batch norm, a pool, two Linear layers; the activation after a convolution and after a Linear)
exported by the TorchScript exporter (dynamo=False) and by the dynamo one, loaded, and run by the numpy reference in
float64 against torch's float32 output. Prints what each layer became (folded activations show as `conv:gelu`) or
the one-line refusal. Needs torch and onnx (onnxscript for dynamo); no GPU.

    python tools/torch_activations.py"""
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]


def cases(nn):
    return {"ReLU": nn.ReLU(), "LeakyReLU": nn.LeakyReLU(0.1), "ReLU6": nn.ReLU6(), "Sigmoid": nn.Sigmoid(),
            "Tanh": nn.Tanh(), "Hardsigmoid": nn.Hardsigmoid(), "Hardswish": nn.Hardswish(), "SiLU": nn.SiLU(),
            "ELU": nn.ELU(0.7), "SELU": nn.SELU(), "Softplus": nn.Softplus(), "Mish": nn.Mish(),
            "GELU": nn.GELU(), "GELU tanh": nn.GELU("tanh"), "PReLU": nn.PReLU(), "PReLU per channel": None,
            "CELU": nn.CELU(0.6), "Softsign": nn.Softsign(), "Hardtanh": nn.Hardtanh(-2, 1),
            "LogSigmoid": nn.LogSigmoid(), "Tanhshrink": nn.Tanhshrink()}


def network(nn, act):
    if act is None:                         # nn.PReLU(8): a slope per channel
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(8), nn.Flatten(), nn.Linear(8 * 120, 5)).eval()
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), act, nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), act,
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 16), act, nn.Linear(16, 5)).eval()


def main() -> int:
    warnings.filterwarnings("ignore")
    import torch
    from torch import nn
    from convnet.cnn import reference
    from torchvision_zoo import export_and_load
    x = torch.randn(3, 3, 12, 10, generator=torch.Generator().manual_seed(0))
    print("| activation | exporter | loaded as | error vs torch (max, relative) |\n| --- | --- | --- | --- |")
    for name, act in cases(nn).items():
        for dynamo in (False, True):
            m = network(nn, act)
            with torch.no_grad():
                want = m(x).double().numpy()
            exporter = "dynamo" if dynamo else "TorchScript"
            with tempfile.TemporaryDirectory() as d:
                g, why = export_and_load(m, x, f"{d}/m.onnx", dynamo)
                if g is None:
                    print(f"| {name} | {exporter} | {why} | |")
                    continue
                got = reference.forward(g, x.numpy(), np.float64)
                kinds = ", ".join(f"{x.op}:{x.act.kind}" for x in g.layers if x.act.kind != "none")
                print(f"| {name} | {exporter} | {kinds} | {np.abs(got - want).max() / np.abs(want).max():.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
