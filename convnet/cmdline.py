"""What the command-line entry points (convnet, convnet-predict, convnet-gpt2) share: a parser whose errors
are one line and exit code 2, and argument types that name the problem."""
from __future__ import annotations

import argparse


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):          # one line, exit 2, instead of usage + message
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n
