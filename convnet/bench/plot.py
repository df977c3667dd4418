"""Plots of saved results: python -m convnet.bench.plot RESULTS.json -o OUT.png

RESULTS.json is what `run_milestone.py --compare ... --json` writes. The bar chart shows each variant's
two conv op times and its total side by side, on a log scale (the variants span two orders of magnitude).
matplotlib is the optional extra `plot`.
"""
from __future__ import annotations

import argparse
import json
import sys

from ..errors import UsageError, exit_code


def compare_chart(results: dict, out_path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("plotting needs matplotlib (pip install -e '.[plot]')") from None
    rows = results.get("results")
    if not rows:
        raise UsageError("the JSON holds no 'results' (write it with run_milestone.py --compare ... --json)")
    names = [r["variant"] for r in rows]
    series = [("conv1 op time", [r["op_ms"][0] for r in rows], "#4C72B0"),
              ("conv2 op time", [r["op_ms"][1] for r in rows], "#DD8452"),
              ("total forward pass", [r["total_ms"] for r in rows], "#8C8C8C")]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    height = 0.27
    for k, (label, values, color) in enumerate(series):
        ax.barh([i + (k - 1) * height for i in range(len(names))], values, height, label=label, color=color)
    y = range(len(names))
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds (log scale)")
    ax.set_title(f"LeNet-86, batch {results.get('batch')} on {rows[0].get('device', '?')}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", help="JSON written by run_milestone.py --compare ... --json")
    p.add_argument("-o", "--out", required=True, help="PNG to write")
    args = p.parse_args(argv)

    def command():
        try:
            with open(args.results) as f:
                results = json.load(f)
        except (OSError, ValueError) as e:
            raise UsageError(f"{args.results}: cannot read results JSON ({e})") from None
        compare_chart(results, args.out)
        return 0
    return exit_code("plot", command)


if __name__ == "__main__":
    sys.exit(main())
