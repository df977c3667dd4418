"""Networks written in PyTorch and exported with torch.onnx.export (dynamic batch), as a user brings them: LeNet-5
trained for a few hundred steps on Fashion-MNIST, and VGG-, ResNet- and MobileNetV2-style nets on random weights.
Every variant of the ONNX path against PyTorch in float64 (the oracle), on the GPU machine (torch is there)."""
import copy

import numpy as np
import pytest

from helpers import rel_err

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
nn = torch.nn
F = torch.nn.functional

VARIANTS = ["cpu", "im2col", "direct", "direct_graph", "igemm_f16", "igemm_f16_nhwc", "igemm_f16_wgmma",
            "igemm_f16_graph"]


def half(name) -> bool:
    """fp16 operands: 2e-2 relative, the same class on 99 % of the images (fp32: 1e-5, 99.9 %)."""
    from convnet import catalogue
    return catalogue.get(name, "onnx").precision != "fp32"


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.avg_pool2d(F.relu(self.c2(x)), 2)
        x = x.view(x.size(0), -1)                  # the common idiom: Shape / Gather / ... / Reshape in the file
        return self.f3(F.relu(self.f2(F.relu(self.f1(x)))))


class VGG(nn.Module):
    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for out in (16, 32, 64):
            layers += [nn.Conv2d(c, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(),
                       nn.Conv2d(out, out, 3, padding=1), nn.LeakyReLU(0.1), nn.MaxPool2d(2)]
            c = out
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(64 * 16, 10), nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(self.features(x))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn_a = nn.BatchNorm2d(cout)
        self.b = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn_b = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)) \
            if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return F.relu(self.bn_b(self.b(F.relu(self.bn_a(self.a(x))))) + self.down(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


class MobileNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.expand = nn.Sequential(nn.Conv2d(16, 96, 1, bias=False), nn.BatchNorm2d(96), nn.ReLU6(),
                                    nn.Conv2d(96, 96, 3, 1, 1, groups=96, bias=False), nn.BatchNorm2d(96), nn.ReLU6(),
                                    nn.Conv2d(96, 16, 1, bias=False), nn.BatchNorm2d(16))
        self.tail = nn.Sequential(nn.Conv2d(16, 32, 3, 1, 1), nn.Tanh(), nn.AvgPool2d(2), nn.Conv2d(32, 8, 1),
                                  nn.Sigmoid())
        self.fc = nn.Linear(8 * 8 * 8, 5)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.expand(x)
        return self.fc(torch.flatten(self.tail(x), 1))


def randomise_batchnorm(model, seed):
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):               # statistics as training leaves them, not 0 / 1
            m.running_mean.copy_(0.1 * torch.randn(m.num_features, generator=g))
            m.running_var.copy_(0.5 + torch.rand(m.num_features, generator=g))
            m.weight.data.copy_(1 + 0.2 * torch.randn(m.num_features, generator=g))
            m.bias.data.copy_(0.1 * torch.randn(m.num_features, generator=g))
    return model.eval()


def export(model, shape, path, opset=13):
    x = torch.zeros(1, *shape)
    kw = dict(input_names=["input"], output_names=["out"], dynamic_axes={"input": {0: "N"}, "out": {0: "N"}},
              opset_version=opset)
    try:
        torch.onnx.export(model, (x,), str(path), dynamo=False, **kw)
    except TypeError:                                   # a torch without the dynamo switch
        torch.onnx.export(model, (x,), str(path), **kw)
    return path


def float64(model, x):
    """The oracle: a float64 copy of the model (it stays fp32) on x, on the GPU (torch's float64 convolutions on
    the CPU take minutes for torchvision's nets)."""
    with torch.no_grad():
        return copy.deepcopy(model).double().cuda()(torch.from_numpy(x).double().cuda()).cpu().numpy()


def check(model, shape, tmp_path, rng, batch, opset=13):
    from convnet import catalogue
    from convnet.cnn import graph, reference
    from convnet.cnn.gpu import GPUNet
    path = export(model, shape, tmp_path / "net.onnx", opset)
    g = graph.load(path)
    x = rng.standard_normal((batch, *shape)).astype(np.float32)
    want = float64(model, x)
    for name in VARIANTS:
        if name == "cpu":
            got = reference.forward(g, x)
        else:
            net = GPUNet(g, catalogue.get(name, "onnx"))
            net.rt.pool.fill("cnna", np.nan, np.float32)
            net.rt.pool.fill("cnna", np.nan, np.float16)
            got = net.forward(x)
        assert rel_err(got, want) <= (2e-2 if half(name) else 1e-5), name
    return g


@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("make,shape", [(VGG, (3, 32, 32)), (ResNet, (3, 64, 64)), (MobileNetV2, (3, 32, 32))],
                         ids=["vgg", "resnet", "mobilenetv2"])
def test_exported_from_torch_random_weights(tmp_path, make, shape, batch):
    torch.manual_seed(batch)
    g = check(randomise_batchnorm(make(), batch), shape, tmp_path, np.random.default_rng(batch), batch)
    assert not any(x.op == "affine" for x in g.layers)            # every BatchNorm folded into its conv


@pytest.mark.parametrize("batch", [1, 7])
def test_torchvision_resnet18_at_224(tmp_path, batch):
    """The issue's ResNet-18 (torchvision's, random weights and batch-norm statistics) at 3x224x224: its
    TorchScript export passes weights through Identity nodes; every variant against PyTorch in float64."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(batch)
    model = randomise_batchnorm(torchvision.models.resnet18(num_classes=100), batch)
    check(model, (3, 224, 224), tmp_path, np.random.default_rng(batch), batch)


@pytest.mark.parametrize("name,opset,acts", [("mobilenet_v3_small", 14, {"hardswish", "hardsigmoid"}),
                                             ("mobilenet_v3_small", 13, {"hardsigmoid"}),
                                             ("efficientnet_b0", 13, {"silu", "sigmoid"})])
def test_torchvision_mobilenet_v3_and_efficientnet(tmp_path, name, opset, acts):
    """torchvision's MobileNetV3-Small (HardSwish, or at opset 13 x * HardSigmoid(x), a product of two tensors) and
    EfficientNet-B0 (SiLU exported as x * Sigmoid(x)), both with squeeze-and-excitation (a map times a per-channel
    tensor), random weights and batch-norm statistics, 3x96x96 at batch 3: every variant against PyTorch in float64."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(3)
    model = randomise_batchnorm(getattr(torchvision.models, name)(num_classes=10), 3)
    g = check(model, (3, 96, 96), tmp_path, np.random.default_rng(3), 3, opset)
    assert acts <= {x.act.kind for x in g.layers} and any(x.op == "mul" for x in g.layers)


@pytest.mark.parametrize("name", ["regnet_x_400mf", "resnext50_32x4d"])
def test_torchvision_grouped_convolutions(tmp_path, name):
    """torchvision's RegNetX-400MF (groups of 16 channels) and ResNeXt-50 (32 groups), random weights and batch-norm
    statistics, 3x64x64 at batch 2: every variant against PyTorch in float64, their grouped convolutions on
    conv_grouped."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(4)
    model = randomise_batchnorm(getattr(torchvision.models, name)(num_classes=10), 4)
    g = check(model, (3, 64, 64), tmp_path, np.random.default_rng(4), 2)
    assert any(x.op == "conv" and 1 < x.attrs["group"] < x.attrs["w"].shape[0] for x in g.layers)


@pytest.mark.parametrize("on", [False, True], ids=["conv_grouped", "nhwc_depthwise"])
@pytest.mark.parametrize("name,depthwise,se", [("mobilenet_v2", 17, 0), ("mobilenet_v3_small", 11, 9),
                                               ("efficientnet_b0", 16, 16)])
def test_torchvision_depthwise_blocks_in_nhwc(tmp_path, on, name, depthwise, se):
    """torchvision's MobileNetV2 (depthwise layers of stride 1 and 2 between 1x1 convolutions), MobileNetV3-Small
    and EfficientNet-B0 (with squeeze-and-excitation), random weights and batch-norm statistics, 3x96x96 at batch 5,
    on igemm_f16_wgmma against PyTorch in float64, poisoned: with param nhwc_depthwise every depthwise layer runs
    conv_dw_nhwc_f16 and every squeeze-and-excitation product mul_channels_nhwc_f16, in fp16 NHWC."""
    torchvision = pytest.importorskip("torchvision")
    from convnet import catalogue
    from convnet.catalogue import with_setting
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    torch.manual_seed(5)
    model = randomise_batchnorm(getattr(torchvision.models, name)(num_classes=10), 5)
    g = graph.load(export(model, (3, 96, 96), tmp_path / "net.onnx", opset=14))
    x = np.random.default_rng(5).standard_normal((5, 3, 96, 96)).astype(np.float32)
    want = float64(model, x)
    net = GPUNet(g, with_setting(catalogue.get("igemm_f16_wgmma", "onnx"), {"nhwc_depthwise": on}))
    net.rt.pool.fill("cnna", np.nan, np.float32)
    net.rt.pool.fill("cnna", np.nan, np.float16)
    assert rel_err(net.forward(x), want) <= 2e-2
    dw = {i for i, x in enumerate(g.layers) if x.op == "conv" and x.attrs["group"] > 1}
    assert net.nhwc_dws == (dw if on else set()) and len(dw) == depthwise and len(net.nhwc_muls) == (se if on else 0)


class SegmentationOut(nn.Module):
    """torchvision's segmentation nets return a dict; the "out" map is what a user exports."""
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


@pytest.mark.parametrize("name", ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"])
def test_torchvision_segmentation_maps(tmp_path, name):
    """torchvision's segmentation nets (dilated convolutions, a bilinear Resize to the input's size computed from
    its shape), random weights and batch-norm statistics, 3x96x96 at batch 2: every variant's per-pixel class maps
    against PyTorch in float64."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(2)
    model = randomise_batchnorm(SegmentationOut(getattr(torchvision.models.segmentation, name)(
        num_classes=5, weights_backbone=None, aux_loss=None)), 2)
    g = check(model, (3, 96, 96), tmp_path, np.random.default_rng(2), 2)
    assert any(x.op == "resize" for x in g.layers)


def test_trained_lenet5_predicts_as_torch_on_all_10000(tmp_path):
    """LeNet-5 trained briefly on Fashion-MNIST (28x28, scaled to [0, 1]): every variant predicts as PyTorch fp32
    on all 10,000 test images, and agrees with PyTorch float64 to 1e-5."""
    from convnet import catalogue, data
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    torch.manual_seed(0)
    raw = data.load_raw("test")
    x = (raw.images.astype(np.float32) / 255.0)[:, None]
    y = torch.from_numpy(raw.labels.astype(np.int64))
    model = LeNet5()
    opt = torch.optim.Adam(model.parameters(), 2e-3)
    xt = torch.from_numpy(x)
    for step in range(300):
        i = torch.randint(0, len(xt), (128,))
        loss = F.cross_entropy(model(xt[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    check(model, (1, 28, 28), tmp_path, np.random.default_rng(0), 7)
    with torch.no_grad():
        want = model(xt).argmax(1).numpy()
    g = graph.load(tmp_path / "net.onnx")
    for name in VARIANTS[1:]:
        got = GPUNet(g, catalogue.get(name, "onnx")).forward(x).argmax(1)
        assert (got == want).mean() >= (0.99 if half(name) else 0.999), name     # near-ties at most
    assert (want == raw.labels).mean() > 0.7                     # trained: the weights mean something
