"""Summaries and output: machine facts, median and spread per metric, results.md and .json."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from suite import METRICS, Metric

DASH = "\u2013"  # an en dash, for ranges


@dataclasses.dataclass(frozen=True)
class Row:
    """One metric over all runs."""

    metric: Metric
    n: int
    runs: list[float]
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.runs) if self.runs else None

    @property
    def met(self) -> bool | None:
        if self.metric.target is None or self.median is None:
            return None
        return self.metric.target.met(self.median)

    def to_json(self) -> dict[str, Any]:
        m = self.metric
        return {
            "key": m.key, "workload": m.label, "n": self.n, "concurrency": m.concurrency,
            "unit": m.unit, "runs": self.runs, "median": self.median,
            "min": min(self.runs) if self.runs else None,
            "max": max(self.runs) if self.runs else None,
            "target": str(m.target) if m.target else None, "met": self.met, "note": self.note,
        }  # fmt: skip


def rows_from(samples: dict[str, list[dict[str, float]]], sizes: dict[str, int],
              notes: dict[str, str]) -> list[Row]:  # fmt: skip
    """A row per metric from each workload's per-run samples."""
    return [
        Row(
            m,
            sizes[m.workload],
            [s[m.key] for s in samples.get(m.workload, [])],
            notes.get(m.workload, ""),
        )
        for m in METRICS
    ]


def extras_from(samples: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Medians of the figures a workload returns beside its table rows (JSON only)."""
    row_keys = {m.key for m in METRICS}
    extras: dict[str, dict[str, float]] = {}
    for workload, runs in samples.items():
        keys = sorted({k for run in runs for k in run} - row_keys)
        if keys:
            extras[workload] = {k: statistics.median(run[k] for run in runs) for k in keys}
    return extras


def _fmt(value: float, unit: str) -> str:
    if unit in ("ms", "ratio"):
        return f"{value:,.2f}"
    return f"{value:,.0f}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) // 1024:,} MiB"
    except OSError:
        pass
    return "unknown"


def git_state(root: Path) -> str:
    """The commit measured, flagged when the working tree differs from it (take it at start:
    the tree may move while a long run goes on)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=False)  # fmt: skip
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return f"{commit} + uncommitted changes" if git("status", "--porcelain", "src") else commit


def write_page(out: Path, name: str, title: str, facts: dict[str, str], body: list[str]) -> None:
    """Write and print ``<out>/<name>.md``: ``title``, the command that ran
    (``benchmarks/<name>.py`` with this process's arguments), ``facts`` and ``body``."""
    lines = [
        f"# Benchmark results: {title}",
        "",
        f"Command: `python benchmarks/{name}.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in facts.items()),
        "",
        *body,
        "",
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


def machine_facts(redis_version: str, git_commit: str) -> dict[str, str]:
    """Where and with what the figures were taken."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": f"{os.cpu_count()} logical, {usable} usable",
        "memory": _memory_total(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "redis_server": redis_version,
        "git_commit": git_commit,
    }


def markdown(result: dict[str, Any], rows: list[Row]) -> str:
    """results.md: the facts, then the table."""
    facts = {**result["machine"], **result["versions"]}
    lines = [
        f"# Benchmark results: {result['library']}",
        "",
        f"Command: `{result['command']}`  ",
        f"Runs per workload: {result['runs']} (median, and min{DASH}max over the runs); "
        f"total time {result['elapsed_s']:.0f} s.",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in facts.items()),
        "",
        f"| workload | N | concurrency | median | min{DASH}max | unit | target | met? |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    for row in rows:
        m = row.metric
        if not row.runs:
            lines.append(f"| {m.label} | {row.n:,} | {m.concurrency} | n/a | | {m.unit} | "
                         f"{m.target or '—'} | {row.note or 'n/a'} |")  # fmt: skip
            continue
        met = "—" if row.met is None else ("yes" if row.met else "**no**")
        spread = f"{_fmt(min(row.runs), m.unit)}{DASH}{_fmt(max(row.runs), m.unit)}"
        lines.append(
            f"| {m.label} | {row.n:,} | {m.concurrency} | {_fmt(row.median or 0, m.unit)} | "
            f"{spread} | {m.unit} | {m.target or '—'} | {met} |"
        )
    lines += ["", "Extra figures (medians):", ""]
    for workload, figures in result["extras"].items():
        shown = ", ".join(f"{k} = {v:,.1f}" for k, v in figures.items())
        lines.append(f"- {workload}: {shown}")
    return "\n".join(lines) + "\n"


def write(out: Path, result: dict[str, Any], rows: list[Row]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    payload = {**result, "rows": [row.to_json() for row in rows]}
    (out / "results.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    (out / "results.md").write_text(markdown(result, rows))
