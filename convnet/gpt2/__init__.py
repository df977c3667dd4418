"""GPT-2 (124M and smaller): numpy reference forward and checkpoint loaders.

Layouts and conventions are documented at the top of model.py.
"""
from .checkpoint import load_hf, load_llmc, save_llmc
from .model import GPT2Config, attention, check_params, forward, param_shapes, random_params

__all__ = ["GPT2Config", "attention", "check_params", "forward", "load_hf", "load_llmc",
           "param_shapes", "random_params", "save_llmc"]
