"""Convolutional networks from ONNX files: the graph, its numpy reference and its GPU path."""
