"""Trains LeNet-86 on the 60,000 Fashion-MNIST training images and writes the weights file.

    pip install -e '.[train]'      # torch, CPU build is enough
    python -m convnet.train --device cuda --out datasets/lenet86/weights.npz

Seeded: Adam (lr 2e-3, cosine decay to 0), batch 128, random horizontal flips, --epochs passes,
deterministic algorithms (the same device and software give the same weights). About 4 min an
epoch on 2 CPU cores, seconds on a GPU. Evaluation uses our own numpy reference, not torch.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from . import data, network, weights as wio


def build_model(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 4, 7, bias=False), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 16, 7, bias=False), nn.ReLU(), nn.MaxPool2d(4),
        nn.Flatten(), nn.Linear(1024, 128), nn.ReLU(), nn.Linear(128, 10))


def export(model) -> dict:
    sd = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    names = {"0.weight": "conv1.weight", "3.weight": "conv2.weight", "7.weight": "fc1.weight",
             "7.bias": "fc1.bias", "9.weight": "fc2.weight", "9.bias": "fc2.bias"}
    return {names[k]: v for k, v in sd.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(wio.WEIGHTS_FILE))
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", default=None, help="folder with the training split (default: Debian's)")
    p.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
    p.add_argument("--limit", type=int, default=None, help="train on the first N images only (smoke tests)")
    args = p.parse_args(argv)

    import os
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")   # deterministic cuBLAS
    import torch
    from tqdm import tqdm
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(args.seed)

    x_train, y_train = data.load("train", args.data_dir, limit=args.limit, progress=True)
    x_test, y_test = data.load("test")
    dev = torch.device(args.device)
    xt = torch.from_numpy(np.ascontiguousarray(x_train)).to(dev)
    yt = torch.from_numpy(y_train).to(dev)
    model = build_model(torch).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    steps = args.epochs * ((len(xt) + args.batch - 1) // args.batch)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        t0 = time.time()
        order = torch.from_numpy(rng.permutation(len(xt))).to(dev)
        total = 0.0
        for s in tqdm(range(0, len(xt), args.batch), desc=f"epoch {epoch + 1}/{args.epochs}", leave=False):
            idx = order[s:s + args.batch]
            xb, yb = xt[idx], yt[idx]
            flip = torch.from_numpy(rng.random(len(idx)) < 0.5).to(dev)
            xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        acc = _torch_accuracy(torch, model, x_test, y_test, dev)
        print(f"epoch {epoch + 1}: loss {total / len(xt):.4f}  test acc (torch) {acc:.4f}  ({time.time() - t0:.0f} s)",
              flush=True)
    w = export(model)
    acc = (network.predict(x_test, w) == y_test).mean()       # the shipped figure: our own reference
    sha = wio.save(w, args.out)
    print(f"reference-path test accuracy {acc:.4f}; wrote {args.out}  sha256 {sha}")


def _torch_accuracy(torch, model, x, y, dev) -> float:
    """Per-epoch progress figure (the final one comes from the numpy reference)."""
    model.eval()
    with torch.no_grad():
        pred = torch.cat([model(torch.from_numpy(x[s:s + 1000]).to(dev)).argmax(1).cpu()
                          for s in range(0, len(x), 1000)])
    return float((pred.numpy() == y).mean())


if __name__ == "__main__":
    main()
