"""LeNet-86 on Fashion-MNIST (and GPT-2) through hand-written, swappable CUDA kernels."""
__version__ = "0.1.0"
