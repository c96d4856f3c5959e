"""Side-by-side benchmarks of lazarus and its Python peers on one local Redis.

Usage::

    .venv/bin/python benchmarks/peers.py [--n N] [--runs R] [--peers a,b,...] [--quick]

Every system runs in its own virtualenv (``benchmarks/.venvs/<system>``, created on first use
with pinned versions) as a subprocess executing ``benchmarks/peers/<system>_bench.py``, which
does producer, worker and timing for one workload and prints one JSON line. lazarus runs the same
way from the project's own ``.venv``. Results: ``benchmarks/results/peers.{md,json,png}``.
See ``benchmarks/README.md`` (*Peers*).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
import report

from lazarus.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
PEERS_DIR = BENCH / "peers"
VENVS = BENCH / ".venvs"
DASH = "\u2013"
REDIS_ARGS = ["--save", "", "--appendonly", "no"]
RUN_TIMEOUT = 900

# Pinned top-level requirements, each installed into its own venv (hiredis everywhere, as
# lazarus's own venv has it: every system talks to Redis through redis-py + hiredis).
PINS: dict[str, list[str]] = {
    "bullmq": ["bullmq==3.4.4", "hiredis==3.5.0"],
    "saq": ["saq[redis]==0.26.4", "hiredis==3.5.0", "typing_extensions==4.16.0"],
    "dramatiq": ["dramatiq[redis]==2.2.1", "hiredis==3.5.0"],
    "taskiq": ["taskiq==0.13.0", "taskiq-redis==1.2.4", "hiredis==3.5.0"],
    "arq": ["arq==0.28.0", "hiredis==3.5.0"],
    "rq": ["rq==3.0.0", "hiredis==3.5.0"],
    "celery": ["celery[redis]==5.7.0", "hiredis==3.5.0"],
    "report": ["matplotlib==3.11.2"],
}


@dataclasses.dataclass(frozen=True)
class System:
    name: str  # column label
    venv: str  # "lazarus" means the project's .venv
    script: str
    variant: str = ""


SYSTEMS = [
    System("lazarus", "lazarus", "lazarus_bench.py"),
    System("bullmq", "bullmq", "bullmq_bench.py"),
    System("saq", "saq", "saq_bench.py"),
    System("dramatiq", "dramatiq", "dramatiq_bench.py"),
    System("taskiq", "taskiq", "taskiq_bench.py"),
    System("arq", "arq", "arq_bench.py"),
    System("arq (poll 0.01)", "arq", "arq_bench.py", "fast"),
    System("rq", "rq", "rq_bench.py"),
    System("celery", "celery", "celery_bench.py"),
]


@dataclasses.dataclass(frozen=True)
class Workload:
    key: str
    label: str
    args: list[str]
    unit: str  # "jobs/s" (higher is better) or "ms" (lower is better)
    figure: str = "value"


def workloads(n: int, latency_seconds: float) -> list[Workload]:
    lat = ["--workload", "latency", "--concurrency", "10", "--rate", "200",
           "--seconds", str(latency_seconds)]  # fmt: skip
    return [
        Workload("add", "enqueue one by one", ["--workload", "add"], "jobs/s"),
        Workload(
            "add_bulk", "enqueue in bulk (chunks of 1,000)", ["--workload", "add_bulk"], "jobs/s"
        ),
        Workload(
            "drain_noop_10",
            "drain no-op jobs, concurrency 10",
            ["--workload", "drain", "--concurrency", "10"],
            "jobs/s",
        ),
        Workload(
            "drain_noop_50",
            "drain no-op jobs, concurrency 50",
            ["--workload", "drain", "--concurrency", "50"],
            "jobs/s",
        ),
        Workload(
            "drain_sleep_50",
            "drain 10 ms-sleep jobs, concurrency 50",
            ["--workload", "drain", "--concurrency", "50", "--behaviour", "sleep"],
            "jobs/s",
        ),
        Workload(
            "failure_50",
            "drain failing jobs (1 attempt), concurrency 50",
            ["--workload", "failure", "--concurrency", "50"],
            "jobs/s",
        ),
        Workload("latency_p50", "pickup latency p50 (200 jobs/s, idle worker)", lat, "ms", "p50"),
        Workload("latency_p99", "pickup latency p99 (200 jobs/s, idle worker)", lat, "ms", "p99"),
    ]


# -- venvs ---------------------------------------------------------------------------------


def python_of(venv: str) -> Path:
    if venv == "lazarus":
        return ROOT / ".venv" / "bin" / "python"
    return VENVS / venv / "bin" / "python"


def ensure_venv(name: str) -> Path:
    """Create ``benchmarks/.venvs/<name>`` with the pinned packages unless it already has them."""
    path = VENVS / name
    marker = path / ".pins"
    wanted = "\n".join(PINS[name]) + "\n"
    if marker.exists() and marker.read_text() == wanted and python_of(name).exists():
        return python_of(name)
    print(f"creating {path} with {' '.join(PINS[name])}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    subprocess.run([str(python_of(name)), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", *PINS[name]], check=True)  # fmt: skip
    marker.write_text(wanted)
    return python_of(name)


def freeze(venv: str) -> dict[str, str]:
    command = [str(python_of(venv)), "-m", "pip", "freeze", "--disable-pip-version-check"]
    out = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    return dict(line.split("==", 1) for line in out.splitlines() if "==" in line)


# -- running -------------------------------------------------------------------------------


def run_one(system: System, workload: Workload, url: str, n: int) -> dict[str, Any]:
    """One run of one workload by one system: the script's JSON, or ``{"error": ...}``."""
    command = [str(python_of(system.venv)), str(PEERS_DIR / system.script), "--redis", url,
               "--n", str(n), *workload.args]  # fmt: skip
    if system.variant:
        command += ["--variant", system.variant]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              cwd=PEERS_DIR, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {RUN_TIMEOUT} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {done.returncode}: {' | '.join(tail)}"}
    result: dict[str, Any] = json.loads(lines[-1])
    result["wall_s"] = time.perf_counter() - started
    expected = n if workload.key == "failure_50" else 0
    stored = result.get("failed_store")
    if "value" in result and stored is not None and stored != expected:
        result["error"] = f"failed store holds {stored}, expected {expected}"
    return result


def summarise(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:  # noqa: C901
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="jobs per workload (default 20,000)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="N = 2,000, 2 s of latency")
    parser.add_argument("--peers", default=None,
                        help="comma-separated systems (names as in the table; 'arq-fast' for "
                        "arq (poll 0.01))")  # fmt: skip
    parser.add_argument("--only", action="append", default=[], metavar="KEY",
                        help="run only this workload (repeatable): add, add_bulk, drain_noop_10, "
                        "drain_noop_50, drain_sleep_50, failure_50, latency")  # fmt: skip
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--no-chart", action="store_true", help="skip peers.png (and its venv)")
    args = parser.parse_args(argv)
    n = args.n or (2_000 if args.quick else 20_000)
    latency_seconds = 2.0 if args.quick else 5.0
    systems = SYSTEMS
    if args.peers:
        wanted = {p.strip() for p in args.peers.split(",")} | {"lazarus"}
        systems = [s for s in SYSTEMS if s.name in wanted or
                   (s.variant and f"{s.venv}-{s.variant}" in wanted)]  # fmt: skip
    for venv in sorted({s.venv for s in systems} - {"lazarus"}):
        ensure_venv(venv)
    loads = workloads(n, latency_seconds)
    if args.only:
        wanted_loads = {"latency_p50" if k == "latency" else k for k in args.only}
        unknown = wanted_loads - {w.key for w in loads}
        if unknown:
            parser.error(f"--only: unknown workload(s) {sorted(unknown)}")
        wanted_loads |= {"latency_p99"} if "latency_p50" in wanted_loads else set()
        loads = [w for w in loads if w.key in wanted_loads]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s.name: {} for s in systems}
    started = time.perf_counter()
    with EmbeddedRedis(extra_args=REDIS_ARGS) as server:
        client = redis.Redis.from_url(server.url)
        redis_version = ".".join(str(p) for p in server.version)
        for index in range(args.runs):
            for workload in loads:
                if workload.key == "latency_p99":
                    continue  # the p50 run records both
                for system in systems:  # systems interleaved, so background noise spreads
                    client.flushdb()
                    result = run_one(system, workload, server.url, n)
                    runs[system.name].setdefault(workload.key, []).append(result)
                    if workload.key == "latency_p50":
                        runs[system.name].setdefault("latency_p99", []).append(result)
                    shown = {k: round(v, 2) if isinstance(v, float) else v
                             for k, v in result.items()}  # fmt: skip
                    print(f"run {index + 1}/{args.runs} {workload.key:15} {system.name:16} "
                          f"{shown}", file=sys.stderr, flush=True)  # fmt: skip
        client.flushdb()
        client.close()
    table: dict[str, dict[str, Any]] = {}
    for workload in loads:
        row: dict[str, Any] = {}
        for system in systems:
            results = runs[system.name].get(workload.key, [])
            errors = [r["error"] for r in results if "error" in r]
            nas = [r["na"] for r in results if "na" in r]
            values = [float(r[workload.figure]) for r in results
                      if "error" not in r and workload.figure in r]  # fmt: skip
            if errors:
                row[system.name] = {"error": errors[0]}
            elif nas:
                row[system.name] = {"na": nas[0]}
            elif values:
                row[system.name] = {**summarise(values), "runs": values}
        table[workload.key] = row
    result = {
        "command": shlex.join(["python", "benchmarks/peers.py", *sys.argv[1:]]),
        "quick": args.quick,
        "n": n,
        "runs": args.runs,
        "latency": {"rate": 200, "seconds": latency_seconds, "concurrency": 10},
        "machine": {
            **report.machine_facts(redis_version, report.git_state(ROOT)),
            "load_note": load_note(),
        },
        "versions": {s.name: versions_of(s) for s in systems},
        "workloads": {w.key: {"label": w.label, "unit": w.unit} for w in loads},
        "results": table,
        "raw": runs,
        "elapsed_s": time.perf_counter() - started,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    markdown = render(result, [s.name for s in systems])
    (args.out / "peers.md").write_text(markdown)
    if not args.no_chart:
        chart(args.out)
    print(markdown)
    return 0


def load_note() -> str:
    one, five, _ = os.getloadavg()
    return f"load average at the end: {one:.2f} (1 min), {five:.2f} (5 min)"


def versions_of(system: System) -> dict[str, str]:
    frozen = freeze(system.venv)
    keep = {"lazarus", "bullmq", "saq", "dramatiq", "taskiq", "taskiq-redis", "arq", "rq",
            "celery", "kombu", "redis", "hiredis"}  # fmt: skip
    found = {k: v for k, v in frozen.items() if k.lower() in keep}
    if system.venv == "lazarus":  # an editable install: pip freeze shows no version
        from lazarus import __version__

        found["lazarus"] = __version__
    return found or frozen


def _cell(entry: dict[str, Any] | None, unit: str) -> str:
    if entry is None:
        return ""
    if "error" in entry:
        return "error"
    if "na" in entry:
        return "n/a"
    fmt = (lambda v: f"{v:,.1f}") if unit == "ms" else (lambda v: f"{v:,.0f}")
    return f"{fmt(entry['median'])} ({fmt(entry['min'])}{DASH}{fmt(entry['max'])})"


def ratio(row: dict[str, Any], unit: str) -> tuple[str, str]:
    """lazarus ÷ the best peer's median, and that peer."""
    ours = row.get("lazarus", {}).get("median")
    peers = {k: v["median"] for k, v in row.items() if k != "lazarus" and "median" in v}
    if ours is None or not peers:
        return "", ""
    best = (min if unit == "ms" else max)(peers, key=lambda k: peers[k])
    return f"{ours / peers[best]:.2f}", best


def render(result: dict[str, Any], names: list[str]) -> str:
    m = result["machine"]
    kind = "QUICK run (--quick)" if result["quick"] else "full run"
    lines = [
        "# lazarus and its Python peers, side by side",
        "",
        f"**{kind}**: N = {result['n']:,} jobs per workload, {result['runs']} runs each "
        f"(median, and min{DASH}max over the runs); total time {result['elapsed_s']:.0f} s.  ",
        f"Command: `{result['command']}`  ",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory']} RAM, {m['os']}; "
        f"{m['python']}; redis-server {m['redis_server']} (one server, `--save '' "
        f"--appendonly no`, FLUSHDB between runs); lazarus at {m['git_commit']}; {m['date']}.  ",
        f"Shared machine: other work may have been running ({m['load_note']}).",
        "",
        "Throughput rows are jobs/s (higher is better); latency rows are ms (lower is better). "
        "The last column is lazarus's median divided by the best peer's median (throughput: "
        "> 1 means lazarus is faster; latency: < 1 means lazarus is quicker).",
        "",
        "| workload | " + " | ".join(names) + " | lazarus ÷ best peer |",
        "|---|" + "---:|" * len(names) + "---|",
    ]
    notes: list[str] = []
    for key, meta in result["workloads"].items():
        row = result["results"][key]
        cells = [_cell(row.get(name), meta["unit"]) for name in names]
        value, best = ratio(row, meta["unit"])
        lines.append(f"| {meta['label']} ({meta['unit']}) | " + " | ".join(cells) +
                     f" | {value}{f' (vs {best})' if best else ''} |")  # fmt: skip
        for name in names:
            entry = row.get(name) or {}
            if "na" in entry or "error" in entry:
                notes.append(f"- {key}, {name}: {entry.get('na') or entry.get('error')}")
    lines += ["", "Not applicable / errors:", "", *notes, "", "Versions:", ""]
    for name, versions in result["versions"].items():
        lines.append(f"- {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    lines += ["", "How each system is driven, and the fairness notes: "
              "[`benchmarks/README.md`](../README.md#peers).", ""]  # fmt: skip
    return "\n".join(lines)


def chart(out: Path) -> None:
    """peers.png, drawn by the report venv's matplotlib (or skipped with a note)."""
    try:
        python = ensure_venv("report")
    except subprocess.CalledProcessError as exc:
        print(f"no chart: cannot create the report venv ({exc})", file=sys.stderr)
        return
    subprocess.run([str(python), str(PEERS_DIR / "chart.py"), str(out / "peers.json"),
                    str(out / "peers.png")], check=False)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
