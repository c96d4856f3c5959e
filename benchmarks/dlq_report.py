"""Figures of ``dlq_scale.py``: one :class:`Row` per measurement with its target, and the
results files (markdown and JSON), one column per store size, merged with earlier sizes."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PAUSE_MS = 10


@dataclasses.dataclass(frozen=True)
class Target:
    """``value < limit``, ``value <= limit`` or ``value >= limit`` (``op``)."""

    op: str
    limit: float

    def met(self, value: float) -> bool:
        if self.op == "<":
            return value < self.limit
        return value <= self.limit if self.op == "<=" else value >= self.limit

    def __str__(self) -> str:
        shown = f"{self.limit:,.0f}" if self.limit >= 100 else f"{self.limit:g}"
        sign = {"<": "<", "<=": "≤", ">=": "≥"}[self.op]
        return f"{sign} {shown}"


@dataclasses.dataclass
class Row:
    """One figure: ``value`` is what the target judges (p99 for latencies); ``p50`` is shown
    beside it for latencies."""

    key: str
    label: str
    unit: str
    value: float
    target: Target | None = None
    p50: float | None = None
    samples: int = 1
    note: str = ""
    cost: dict[str, Any] | None = None

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.value)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key, "label": self.label, "unit": self.unit, "value": self.value,
            "p50": self.p50, "samples": self.samples, "note": self.note,
            "target": str(self.target) if self.target else None, "met": self.met,
            "cost": self.cost,
        }  # fmt: skip


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100)."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _fmt(row: dict[str, Any]) -> str:
    value, unit = row["value"], row["unit"]
    if unit == "ms":
        main = f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"
        if row.get("p50") is not None:
            p50 = row["p50"]
            main = (f"{p50:,.1f}" if p50 >= 10 else f"{p50:,.2f}") + " / " + main
        return main
    if unit == "ratio":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def _met(row: dict[str, Any] | None) -> str:
    if row is None or row["met"] is None:
        return ""
    return "yes" if row["met"] else "**no**"


def merge(path: Path, fresh: dict[str, Any]) -> dict[str, Any]:
    """``fresh`` with the sizes of an earlier results file that this run did not measure."""
    if not path.exists():
        return fresh
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return fresh
    sizes = {**earlier.get("sizes", {}), **fresh["sizes"]}
    return {**fresh, "sizes": dict(sorted(sizes.items(), key=lambda kv: int(kv[0])))}


def figures_table(result: dict[str, Any]) -> list[str]:
    """The figures: a row per measurement, a value and a met? column per size."""
    sizes = list(result["sizes"])
    head = "| measurement | unit | target | " + " | ".join(f"N = {int(s):,} | met?" for s in sizes)
    lines = [head + " |", "|---|---|---|" + "---:|---|" * len(sizes)]
    order: dict[str, dict[str, Any]] = {}
    for size in sizes:
        for row in result["sizes"][size]["rows"]:
            order.setdefault(row["key"], row)
    for key, first in order.items():
        cells = []
        for size in sizes:
            row = next((r for r in result["sizes"][size]["rows"] if r["key"] == key), None)
            cells += ["—" if row is None else _fmt(row), _met(row)]
        unit = "p50 / p99 ms" if first["unit"] == "ms" and first.get("p50") is not None else (
            first["unit"])  # fmt: skip
        lines.append(f"| {first['label']} | {unit} | {first['target'] or '—'} | "
                     + " | ".join(cells) + " |")  # fmt: skip
    return lines


def pauses_table(result: dict[str, Any]) -> list[str]:
    """Redis's worst pause per phase and size: PING round trip, slowest command, and Redis CPU
    per script call."""
    sizes = list(result["sizes"])
    head = "| phase | " + " | ".join(
        f"N = {int(s):,}: PING max | slowest command | CPU / script | met?" for s in sizes
    )
    lines = [head + " |", "|---|" + "---:|---|---:|---|" * len(sizes)]
    phases: list[str] = []
    for size in sizes:
        for pause in result["sizes"][size]["pauses"]:
            if pause["phase"] not in phases:
                phases.append(pause["phase"])
    for phase in phases:
        cells = []
        for size in sizes:
            pause = next((p for p in result["sizes"][size]["pauses"] if p["phase"] == phase), None)
            cells += ["—", "—", "—", ""] if pause is None else _pause_cells(pause)
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    return lines


def _pause_cells(pause: dict[str, Any]) -> list[str]:
    met = "" if not pause["judged"] else ("yes" if pause["ping_ms"] < PAUSE_MS else "**no**")
    slowest = "< 1" if not pause["slowest"] else f"{pause['slowest_ms']:.1f} ({pause['slowest']})"
    per_script = pause.get("cpu_per_script_ms")
    return [
        f"{pause['ping_ms']:.1f}",
        slowest,
        "—" if per_script is None else f"{per_script:.1f}",
        met,
    ]


def cost_table(result: dict[str, Any]) -> list[str]:
    """Per call (ms) or per dead letter (µs): wall time, the benchmark process's CPU time and
    Redis's CPU time."""
    sizes = list(result["sizes"])
    head = "| measurement | per | " + " | ".join(
        f"N = {int(s):,}: wall / client CPU / Redis CPU" for s in sizes
    )
    lines = [head + " |", "|---|---|" + "---:|" * len(sizes)]
    keys: dict[str, dict[str, Any]] = {}
    for size in sizes:
        for row in result["sizes"][size]["rows"]:
            if row.get("cost"):
                keys.setdefault(row["key"], row)
    for key, first in keys.items():
        cells = []
        for size in sizes:
            row = next((r for r in result["sizes"][size]["rows"] if r["key"] == key), None)
            cost = row.get("cost") if row else None
            cells.append(
                "—" if not cost else " / ".join(
                    f"{cost[k]:,.1f}" if cost[k] >= 10 else f"{cost[k]:.2f}"
                    for k in ("wall", "cpu", "redis")
                )
            )  # fmt: skip
        per = f"{first['cost']['unit']} per {first['cost']['per']}"
        lines.append(f"| {first['label']} | {per} | " + " | ".join(cells) + " |")
    return lines


def markdown(result: dict[str, Any]) -> str:
    """dlq_scale.md: how it ran, the figures, the pauses."""
    lines = [
        "# Dead letter store at scale",
        "",
        f"Command: `{result['command']}`",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in result["machine"].items()),
        "",
    ]
    for size, sized in result["sizes"].items():
        lines.append(
            f"- N = {int(size):,}: measured {sized['date']} at {sized['commit']}, "
            f"{sized['runs']} run(s), {sized['elapsed_s']:,.0f} s, load average "
            f"{sized['load_before']} before, {sized['load_after']} after"
        )
    lines += ["", "## Figures", "", *figures_table(result), ""]
    lines += ["## Where the time goes (means)", "", *cost_table(result), ""]
    lines += [
        "## Redis's worst pause per phase (ms)",
        "",
        "Target: PING max < 10 ms; set-up phases are not judged. CPU / script: Redis's CPU time"
        " over the phase divided by its script calls (other commands of the phase counted in):"
        " what one call holds Redis for when nothing else runs on the machine.",
        "",
    ]
    lines += [*pauses_table(result), ""]
    notes = [f"- N = {int(s):,}: {n}" for s, v in result["sizes"].items() for n in v["notes"]]
    if notes:
        lines += ["## Notes", "", *notes, ""]
    return "\n".join(lines)


def write(md_path: Path, result: dict[str, Any], *, keep_earlier: bool) -> dict[str, Any]:
    """Write ``md_path`` and the JSON beside it (with ``keep_earlier``, the sizes the JSON
    held that this run did not measure stay); returns what was written."""
    json_path = md_path.with_suffix(".json")
    merged = merge(json_path, result) if keep_earlier else result
    md_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    md_path.write_text(markdown(merged))
    return merged
