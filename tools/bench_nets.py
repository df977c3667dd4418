"""The ONNX files behind docs/onnx.md's figures (random weights), for `convnet-bench cnn FILE`:

    python tools/bench_nets.py OUT_DIR      -> lenet5.onnx, vgg_cifar.onnx, resnet224.onnx
                                               [, resnet18.onnx, mobilenet_v2.onnx, mobilenet_v3_small.onnx]

lenet5, vgg_cifar and resnet224 (tests/cnn_models.py's ResNet-style net: a 7x7 stem and two basic blocks, at 224x224)
are written with onnx.helper; resnet18, mobilenet_v2 and mobilenet_v3_small are torchvision's (ResNet-18 with 1,000
classes and its default initialisation, the MobileNets with 10 classes and batch-norm statistics as training leaves
them, tools/torchvision_zoo.py's trained_like), exported by torchvision_zoo.export where torch and torchvision are
installed (the GPU machine), else left out with a line saying so."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))         # torchvision_zoo


def main(argv=None) -> int:
    import onnx
    from cnn_models import MODELS, resnet_block
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = Path(argv[0])
    names = ["lenet5", "vgg_cifar", "resnet224", "resnet18", "mobilenet_v2", "mobilenet_v3_small"]
    taken = [out / f"{n}.onnx" for n in names if (out / f"{n}.onnx").exists()]
    if taken:                                  # never overwrite a file this tool did not just write
        print(f"bench_nets.py: {taken[0]} exists; give an empty or new folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    nets = {"lenet5": MODELS["lenet5"], "vgg_cifar": MODELS["vgg_cifar"],
            "resnet224": lambda rng: resnet_block(rng, size=224)}
    for name, build in nets.items():
        model, _ = build(np.random.default_rng(0))
        onnx.save(model, str(out / f"{name}.onnx"))
        print(out / f"{name}.onnx")
    try:
        import torch
        import torchvision
    except ImportError:
        print("resnet18.onnx and the MobileNets left out: they need torch and torchvision", file=sys.stderr)
        return 0
    from torchvision_zoo import build, export, trained_like
    torch.manual_seed(0)                       # ImageNet's 1,000 classes, default initialisation (the recorded figures')
    export(torchvision.models.resnet18(num_classes=1000).eval(), torch.randn(1, 3, 224, 224), str(out / "resnet18.onnx"),
           dynamo=False)
    print(out / "resnet18.onnx")
    for name in ("mobilenet_v2", "mobilenet_v3_small"):
        export(trained_like(build(name)), torch.randn(2, 3, 224, 224), str(out / f"{name}.onnx"), dynamo=False)
        print(out / f"{name}.onnx")
    return 0


if __name__ == "__main__":
    sys.exit(main())
