"""How the operator commands show things: rich tables for people, plain dicts for ``--json``.

Times are ms since the epoch in the library and ISO 8601 (UTC) strings here. Every value that
comes from a job is printed as :class:`rich.text.Text`, so a job named ``[bold]`` stays literal.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from typing import Any

from rich import box
from rich.console import Console
from rich.json import JSON
from rich.table import Table
from rich.text import Text

from ..dead_letter import DeadLetterStats
from ..job import AttemptRecord, DeadLetterMetadata, Job
from ..operators import QueueSummary

FAILED_REASON_WIDTH = 60
_TIME_KEYS = (
    "deadLetteredAt", "originalTimestamp", "startedAt", "finishedAt", "statusAt", "at",
    "lastReplayedAt",
)  # fmt: skip


def console(*, stderr: bool = False) -> Console:
    """A console for the current stdout (or stderr). Piped output is 200 columns wide unless
    ``COLUMNS`` says otherwise, so ids are not folded in logs and greps."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or "COLUMNS" in os.environ else 200
    # markup=False: queue names, job names and errors may contain "[...]"; print them literally.
    return Console(file=stream, width=width, soft_wrap=False, highlight=False, markup=False)


def now_ms() -> int:
    return int(time.time() * 1000)


def iso(ms: int | None) -> str | None:
    """``ms`` since the epoch as an ISO 8601 UTC time with milliseconds, e.g.
    ``2025-01-15T10:30:00.123Z``."""
    if ms is None:
        return None
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def duration(seconds: float) -> str:
    """A short human duration with its two largest units: ``45s``, ``3m 12s``, ``2d 4h``."""
    left = max(int(seconds), 0)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def age(ms: int | None, *, now: int) -> str:
    return "" if ms is None else duration((now - ms) / 1000)


def _times_to_iso(value: Any) -> Any:
    """A copy of ``value`` (JSON data) in which the known time fields are ISO strings."""
    if isinstance(value, list):
        return [_times_to_iso(v) for v in value]
    if isinstance(value, dict):
        return {
            k: iso(v) if k in _TIME_KEYS and isinstance(v, int) else _times_to_iso(v)
            for k, v in value.items()
        }
    return value


# -- queues ----------------------------------------------------------------------------------


def summary_json(s: QueueSummary, *, now: int) -> dict[str, Any]:
    oldest = s.oldest_dead_letter_at
    return {
        "name": s.name,
        "counts": s.counts,
        "paused": s.paused,
        "isDeadLetterQueue": s.is_dead_letter_queue,
        "deadLetters": s.dead_letters,
        "oldestDeadLetterAt": iso(oldest),
        "oldestDeadLetterAgeSeconds": None if oldest is None else max(now - oldest, 0) // 1000,
    }


def queues_table(summaries: list[QueueSummary], *, now: int) -> Table:
    table = Table(box=box.SIMPLE_HEAD)
    for title in ("queue", "waiting", "active", "delayed", "completed", "failed", "paused",
                  "dead letters", "oldest dead letter"):  # fmt: skip
        table.add_column(title, justify="left" if title == "queue" else "right")
    for s in summaries:
        c = s.counts
        waiting = c.get("waiting", 0) + c.get("prioritized", 0) + c.get("paused", 0)
        table.add_row(
            Text(s.name), str(waiting), str(c.get("active", 0)), str(c.get("delayed", 0)),
            str(c.get("completed", 0)), str(c.get("failed", 0)), "yes" if s.paused else "",
            str(s.dead_letters) if s.is_dead_letter_queue else "",
            age(s.oldest_dead_letter_at, now=now),
        )  # fmt: skip
    return table


# -- dead letters ----------------------------------------------------------------------------


def _meta(job: Job) -> DeadLetterMetadata:
    if job.dead_letter is None:  # callers only pass dead letters
        raise ValueError(f"job {job.id!r} is not a dead letter")
    return job.dead_letter


def dead_letter_row_json(job: Job) -> dict[str, Any]:
    meta = _meta(job)
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue_name,
        "sourceQueue": meta.source_queue,
        "reason": meta.reason,
        "status": meta.status,
        "errorType": meta.error_type,
        "failedReason": meta.failed_reason,
        "attemptsMade": meta.attempts_made,
        "replayCount": meta.replay_count,
        "deadLetteredAt": iso(meta.dead_lettered_at),
    }


def truncate(text: str, width: int = FAILED_REASON_WIDTH) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width and line == text else line[: width - 1] + "…"


def dead_letters_table(jobs: list[Job], *, with_queue: bool = False) -> Table:
    """One row per dead letter; ``with_queue`` adds the dead letter queue that holds it."""
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True, min_width=8)
    titles = ("name", "source queue", "reason", "error type", "failed reason")
    for title in ("dead letter queue", *titles) if with_queue else titles:
        table.add_column(title)
    table.add_column("attempts", justify="right")
    table.add_column("dead-lettered at", no_wrap=True)
    for job in jobs:
        row = dead_letter_row_json(job)
        cells = [
            Text(job.name), Text(row["sourceQueue"]), row["reason"],
            Text(row["errorType"]), Text(truncate(row["failedReason"])),
        ]  # fmt: skip
        if with_queue:
            cells.insert(0, Text(job.queue_name))
        table.add_row(Text(job.id), *cells, str(row["attemptsMade"]), row["deadLetteredAt"])
    return table


def dead_letter_json(job: Job) -> dict[str, Any]:
    """``dlq show --json``: the payload as sent and every ``_dlqMeta`` field, times as ISO."""
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue_name,
        "payload": job.original_data,
        "deadLetter": _times_to_iso(_meta(job).to_json()),
    }


def _attempts_table(attempts: list[AttemptRecord]) -> Table:
    table = Table(box=box.SIMPLE_HEAD)
    for title in ("#", "outcome", "worker", "started", "finished", "error type", "error"):
        table.add_column(title, no_wrap=title in ("started", "finished"))
    for a in attempts:
        table.add_row(
            str(a.attempt), a.outcome, Text(a.worker), iso(a.started_at), iso(a.finished_at),
            Text(a.error_type), Text(a.error),
        )  # fmt: skip
    return table


def _timeline_table(meta: DeadLetterMetadata) -> Table:
    table = Table(box=box.SIMPLE_HEAD)
    for title in ("at", "from", "to", "actor", "note", "details"):
        table.add_column(title, no_wrap=title == "at")
    for change in meta.timeline:
        details = ", ".join(f"{k}={v}" for k, v in change.details.items())
        table.add_row(
            iso(change.at), change.from_, change.to, Text(change.actor), Text(change.note or ""),
            Text(truncate(details, 60)),
        )  # fmt: skip
    return table


def print_dead_letter(out: Console, job: Job, *, now: int) -> None:
    """``dlq show``: the metadata, the payload, each attempt and each stack trace."""
    meta = _meta(job)
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    for label, value in (
        ("id", job.id), ("name", job.name), ("dead letter queue", job.queue_name),
        ("source queue", meta.source_queue), ("original job id", meta.original_job_id),
        ("reason", meta.reason), ("status", meta.status), ("error type", meta.error_type),
        ("failed reason", meta.failed_reason), ("attempts made", str(meta.attempts_made)),
        ("replay count", str(meta.replay_count)),
        ("created at", iso(meta.original_timestamp) or ""),
        ("dead-lettered at", f"{iso(meta.dead_lettered_at)} "
                             f"({age(meta.dead_lettered_at, now=now)} ago)"),
    ):  # fmt: skip
        fields.add_row(label, Text(value))
    out.print(fields)
    out.rule("original options")
    out.print(JSON.from_data(meta.original_opts))
    out.rule("payload")
    out.print(JSON.from_data(job.original_data))
    out.rule(f"timeline ({len(meta.timeline)})")
    out.print(_timeline_table(meta) if meta.timeline else "no status change yet")
    out.rule(f"attempts ({len(meta.attempts)})")
    out.print(_attempts_table(meta.attempts) if meta.attempts else "no attempt records")
    for number, trace in enumerate(meta.stacktrace, start=1):
        out.rule(f"stack trace {number} of {len(meta.stacktrace)}")
        out.print(Text(trace.rstrip("\n")))


# -- stats -----------------------------------------------------------------------------------


def stats_json(queue: str, stats: DeadLetterStats) -> dict[str, Any]:
    return {
        "queue": queue,
        "total": stats.total,
        "byName": stats.by_name,
        "byErrorType": stats.by_error_type,
        "bySourceQueue": stats.by_source_queue,
        "byReason": stats.by_reason,
        "byStatus": stats.by_status,
        "oldest": iso(stats.oldest),
        "newest": iso(stats.newest),
    }


def print_stats(out: Console, queue: str, stats: DeadLetterStats, *, now: int) -> None:
    out.print(Text(f"{stats.total} dead letters in {queue}"))
    if stats.oldest is not None:
        out.print(Text(f"oldest  {iso(stats.oldest)} ({age(stats.oldest, now=now)} ago)"))
        out.print(Text(f"newest  {iso(stats.newest)} ({age(stats.newest, now=now)} ago)"))
    groups = (("job name", stats.by_name), ("error type", stats.by_error_type),
              ("source queue", stats.by_source_queue), ("reason", stats.by_reason),
              ("status", stats.by_status))  # fmt: skip
    for title, counts in groups:
        if not counts:
            continue
        table = Table(box=box.SIMPLE_HEAD)
        table.add_column(title)
        table.add_column("count", justify="right")
        for key, count in counts.items():
            table.add_row(Text(key), str(count))
        out.print(table)
