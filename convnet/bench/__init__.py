"""The instruments that measure the engine: benchmarks, sweeps, the autotune runner, the cuDNN / PyTorch / HF
anchors, device ceilings, roofline and plots. torch, transformers and matplotlib are imported here only,
lazily; the engine (the rest of convnet/) never imports this package for a user's inference."""
