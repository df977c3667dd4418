#!/usr/bin/env python3
"""Entry point: python run_milestone.py --variant req_1 --batch 10000 (see --help)."""
import sys

from convnet.cli import main

if __name__ == "__main__":
    sys.exit(main())
