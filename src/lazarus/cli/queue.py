"""``lazarus queue``: act on a whole queue by hand — drain it of the jobs that wait to run,
cap how many of its jobs run at once, and how many start per window — and show its
throughput. (``lazarus queues`` lists them.)"""

from __future__ import annotations

import datetime
from typing import Any

import click
from rich import box
from rich.table import Table

from .._limiter import MAX_CONCURRENCY
from .._throughput import METRICS_MINUTES, QueueMetrics
from ..job_options import MAX_DURATION_MS
from ..operators import Operators
from . import _render
from ._options import JSON_OPTION, QUEUE_ARGUMENT, confirm, emit_json, open_queue, run
from .main import PREFIX_OPTION, URL_OPTION


@click.group()
def queue() -> None:
    """Act on a whole queue (`lazarus queues` lists them).

    \b
    Examples:
      lazarus queue drain payments --dry-run
      lazarus queue drain payments --delayed --yes
      lazarus queue concurrency payments 20
      lazarus queue rate-limit payments 50 1000
      lazarus queue metrics payments --minutes 30
    """


def _jobs(count: int) -> str:
    return f"{count} job{'s' if count != 1 else ''}"


@queue.command()
@QUEUE_ARGUMENT
@click.option("--delayed", is_flag=True, help="Remove the delayed jobs too.")
@click.option("--dry-run", is_flag=True, help="Count the jobs only; remove nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def drain(
    queue_name: str, delayed: bool, dry_run: bool, yes: bool, as_json: bool, redis_url: str,
    prefix: str,
) -> None:  # fmt: skip
    """Remove the jobs of QUEUE that wait to run: waiting and prioritized (with --delayed,
    delayed too), added before the drain began. Running jobs finish; finished jobs and the
    dead letters of a dead letter queue stay.

    The jobs are counted first; --dry-run stops there. Otherwise you are asked to confirm
    (--yes skips that; without a terminal, --yes is required).
    """
    kinds = "waiting, prioritized and delayed" if delayed else "waiting and prioritized"

    async def work(ops: Operators) -> dict[str, Any]:
        queue = await open_queue(ops, queue_name)
        matched = await queue.drain(delayed=delayed, dry_run=True)
        report: dict[str, Any] = {"queue": queue_name, "delayed": delayed, "dryRun": dry_run,
                                  "matched": matched, "drained": 0}  # fmt: skip
        if not as_json:
            _render.console().print(f"{_jobs(matched)} {kinds} in {queue_name!r}")
        if dry_run or matched == 0:
            return report
        confirm(f"drain {_jobs(matched)} from {queue_name!r}", yes=yes)
        report["drained"] = await queue.drain(delayed=delayed)
        return report

    report = run(redis_url, prefix, work)
    if as_json:
        emit_json(report)
        return
    out = _render.console()
    if dry_run:
        out.print(f"dry run: {_jobs(report['matched'])} would be drained; nothing was removed")
    elif report["matched"]:
        out.print(f"drained {_jobs(report['drained'])} from {queue_name!r}")
    else:
        out.print("nothing to drain")


@queue.command()
@QUEUE_ARGUMENT
@click.argument("limit", required=False, type=click.IntRange(1, MAX_CONCURRENCY))
@click.option("--remove", is_flag=True, help="Remove the cap.")
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def concurrency(
    queue_name: str, limit: int | None, remove: bool, as_json: bool, redis_url: str, prefix: str
) -> None:
    """Show QUEUE's global concurrency, set it to LIMIT, or --remove it: at most LIMIT of its
    jobs active at once, across every worker (`Queue.set_global_concurrency`).

    \b
    Examples:
      lazarus queue concurrency payments
      lazarus queue concurrency payments 20
      lazarus queue concurrency payments --remove
    """
    if remove and limit is not None:
        raise click.UsageError("give LIMIT or --remove, not both")

    async def work(ops: Operators) -> int | None:
        queue = await open_queue(ops, queue_name)
        if remove:
            await queue.remove_global_concurrency()
        elif limit is not None:
            await queue.set_global_concurrency(limit)
        return await queue.get_global_concurrency()

    cap = run(redis_url, prefix, work)
    if as_json:
        emit_json({"queue": queue_name, "concurrency": cap})
        return
    said = f"at most {cap} active jobs" if cap is not None else "no global concurrency"
    _render.console().print(f"{queue_name!r}: {said}")


@queue.command("rate-limit")
@QUEUE_ARGUMENT
@click.argument("max_jobs", metavar="[MAX]", required=False,
                type=click.IntRange(1, MAX_CONCURRENCY))  # fmt: skip
@click.argument("duration_ms", required=False, type=click.IntRange(1, MAX_DURATION_MS))
@click.option("--remove", is_flag=True, help="Remove the rate limit and its current window.")
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def rate_limit(
    queue_name: str, max_jobs: int | None, duration_ms: int | None, remove: bool, as_json: bool,
    redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """Show QUEUE's rate limit, set it to MAX jobs started per DURATION_MS milliseconds, or
    --remove it: all its workers together start no more (`Queue.set_global_rate_limit`).
    When the limit is reached, it also shows when the current window ends.

    \b
    Examples:
      lazarus queue rate-limit payments
      lazarus queue rate-limit payments 50 1000
      lazarus queue rate-limit payments --remove
    """
    if (max_jobs is None) != (duration_ms is None):
        raise click.UsageError("give MAX and DURATION_MS together")
    if remove and max_jobs is not None:
        raise click.UsageError("give MAX DURATION_MS or --remove, not both")

    async def work(ops: Operators) -> dict[str, int] | None:
        queue = await open_queue(ops, queue_name)
        if remove:
            await queue.remove_global_rate_limit()
        elif max_jobs is not None and duration_ms is not None:
            await queue.set_global_rate_limit(max_jobs, duration_ms)
        limit = await queue.get_global_rate_limit()
        if limit is None:
            return None
        return {"max": limit.max, "duration": limit.duration,
                "ttl": await queue.get_rate_limit_ttl()}  # fmt: skip

    limit = run(redis_url, prefix, work)
    if as_json:
        emit_json({"queue": queue_name, "rateLimit": limit})
        return
    if limit is None:
        said = "no rate limit"
    else:
        said = f"at most {_jobs(limit['max'])} started per {limit['duration']} ms"
        if limit["ttl"]:
            said += f"; reached: the window ends in {limit['ttl']} ms"
    _render.console().print(f"{queue_name!r}: {said}")


@queue.command()
@QUEUE_ARGUMENT
@click.option("--minutes", default=10, show_default=True, type=click.IntRange(1, METRICS_MINUTES),
              help="Minutes of history, per minute.")  # fmt: skip
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def metrics(queue_name: str, minutes: int, as_json: bool, redis_url: str, prefix: str) -> None:
    """Show how many of QUEUE's jobs completed and failed for good (into failed, a dead
    letter queue, or discarded): since the queue was created, and per minute over the last
    --minutes (`Queue.get_metrics`).

    \b
    Examples:
      lazarus queue metrics payments
      lazarus queue metrics payments --minutes 60 --json
    """

    async def work(ops: Operators) -> QueueMetrics:
        return await (await open_queue(ops, queue_name)).get_metrics(minutes)

    m = run(redis_url, prefix, work)
    if as_json:
        emit_json({
            "queue": queue_name, "completed": m.completed, "failed": m.failed,
            "completedPerMinute": [{"at": at, "count": c} for at, c in m.completed_per_minute],
            "failedPerMinute": [{"at": at, "count": c} for at, c in m.failed_per_minute],
        })  # fmt: skip
        return
    out = _render.console()
    out.print(f"{queue_name!r}: {m.completed} completed, {m.failed} failed for good, in all")
    table = Table(box=box.SIMPLE_HEAD)
    for header in ("minute (UTC)", "completed", "failed"):
        table.add_column(header, justify="left" if header.startswith("minute") else "right")
    for (at, done), (_, failed) in zip(m.completed_per_minute, m.failed_per_minute):
        minute = datetime.datetime.fromtimestamp(at / 1000, tz=datetime.timezone.utc)
        table.add_row(f"{minute:%Y-%m-%d %H:%M}", str(done), str(failed))
    out.print(table)
