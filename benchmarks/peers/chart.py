"""Draw peers.png from peers.json: grouped bars of the throughput rows (run by the report venv)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(source: str, target: str) -> None:
    result = json.loads(Path(source).read_text())
    keys = [k for k, w in result["workloads"].items() if w["unit"] == "jobs/s"]
    systems = list(result["versions"])
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(14, 6))
    for i, name in enumerate(systems):
        medians, lows, highs = [], [], []
        for key in keys:
            entry = result["results"][key].get(name) or {}
            m = entry.get("median", 0.0)
            medians.append(m)
            lows.append(m - entry.get("min", m))
            highs.append(entry.get("max", m) - m)
        xs = [j + (i - (len(systems) - 1) / 2) * width for j in range(len(keys))]
        ax.bar(xs, medians, width, label=name, yerr=[lows, highs], capsize=2)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([result["workloads"][k]["label"] for k in keys], rotation=15, ha="right",
                       fontsize=8)  # fmt: skip
    ax.set_ylabel("jobs/s (median; bars: min to max)")
    kind = "quick" if result["quick"] else "full"
    ax.set_title(f"lazarus and peers, one Redis, N = {result['n']:,} ({kind} run, "
                 f"{result['runs']} runs); missing bar = n/a")  # fmt: skip
    ax.legend(fontsize=8, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
