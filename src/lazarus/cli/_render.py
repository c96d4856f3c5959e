"""How the operator commands show things: rich tables for people, plain dicts for ``--json``.

Times are ms since the epoch in the library and ISO 8601 (UTC) strings here. Every value that
comes from a job is printed as :class:`rich.text.Text`, so a job named ``[bold]`` stays literal,
and with its control characters shown as escapes (:func:`clean`), so an error message cannot
clear the screen, retitle the window or hide a link.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import sys
import time
from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text as RichText

from ..dead_letter import DeadLetterStats
from ..history import AttemptRecord, DeadLetterMetadata
from ..job import Job
from ..operators import QueueSummary
from . import _columns as columns
from ._columns import Column

FAILED_REASON_WIDTH = 60
_TIME_KEYS = (
    "deadLetteredAt", "originalTimestamp", "startedAt", "finishedAt", "statusAt", "at",
    "lastReplayedAt",
)  # fmt: skip


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(value: str) -> str:
    """``value`` with every control character but newline and tab shown as an escape
    (``\\x1b``): text from jobs never reaches the terminal as a command."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


def Text(value: str) -> RichText:
    """Untrusted text, cleaned (:func:`clean`) and printed literally."""
    return RichText(clean(value))


def json_view(value: Any) -> RichText:
    """``value`` as indented JSON for people; JSON escapes C0 control characters itself, and
    DEL and C1 are escaped here."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return RichText(re.sub("[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text))


class SafeConsole(Console):
    """A console whose ``print`` cleans plain strings too (:func:`clean`)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(clean(o) if isinstance(o, str) else o for o in objects), **kwargs)


def console(*, stderr: bool = False) -> Console:
    """A console for the current stdout (or stderr). Piped output is 200 columns wide unless
    ``COLUMNS`` says otherwise, so ids are not folded in logs and greps."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or "COLUMNS" in os.environ else 200
    # markup=False: queue names, job names and errors may contain "[...]"; print them literally.
    return SafeConsole(file=stream, width=width, soft_wrap=False, highlight=False, markup=False)


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


QUEUE_COLUMNS = (
    Column("queue", 1, 10), Column("waiting", 2, 7, "right"),
    Column("active", 3, 6, "right"), Column("delayed", 6, 7, "right"),
    Column("completed", 7, 9, "right"), Column("failed", 4, 6, "right"),
    Column("paused", 8, 6, "right"), Column("dead letters", 5, 7, "right"),
    Column("oldest dead letter", 9, 8, "right"),
)  # fmt: skip


def queues_table(
    summaries: list[QueueSummary], *, now: int, out: Console, wide: bool = False
) -> tuple[Table, int]:
    """The queues, with the columns that fit ``out`` (all of them with ``wide``)."""
    rows: list[dict[str, RenderableType]] = []
    for s in summaries:
        c = s.counts
        rows.append({
            "queue": Text(s.name),
            "waiting": str(c.get("waiting", 0) + c.get("prioritized", 0) + c.get("paused", 0)),
            "active": str(c.get("active", 0)), "delayed": str(c.get("delayed", 0)),
            "completed": str(c.get("completed", 0)), "failed": str(c.get("failed", 0)),
            "paused": "yes" if s.paused else "",
            "dead letters": str(s.dead_letters) if s.is_dead_letter_queue else "",
            "oldest dead letter": age(s.oldest_dead_letter_at, now=now),
        })  # fmt: skip
    return columns.table(QUEUE_COLUMNS, rows, out, wide=wide)


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


DEAD_LETTER_COLUMNS = (
    Column("id", 1, 32, no_wrap=True), Column("dead letter queue", 3, 10),
    Column("name", 2, 8), Column("source queue", 7, 10), Column("reason", 6, 12),
    Column("error type", 4, 10), Column("failed reason", 3, 24, grow=True),
    Column("attempts", 8, 8, "right"), Column("age", 5, 7, "right", no_wrap=True),
    Column("dead-lettered at", 9, 24, no_wrap=True),
)  # fmt: skip


def dead_letters_table(
    jobs: list[Job], *, out: Console, with_queue: bool = False, wide: bool = False, now: int
) -> tuple[Table, int]:
    """One row per dead letter, with the columns that fit ``out`` by priority (id, name,
    failed reason, error type, age, ...), all of them with ``wide``; ``with_queue`` adds the
    dead letter queue that holds each."""
    specs = [c for c in DEAD_LETTER_COLUMNS if with_queue or c.title != "dead letter queue"]
    rows: list[dict[str, RenderableType]] = []
    for job in jobs:
        row = dead_letter_row_json(job)
        reason = row["failedReason"] if wide else truncate(row["failedReason"], 200)
        rows.append({
            "id": Text(job.id), "dead letter queue": Text(job.queue_name),
            "name": Text(job.name), "source queue": Text(row["sourceQueue"]),
            "reason": row["reason"], "error type": Text(row["errorType"]),
            "failed reason": Text(reason), "attempts": str(row["attemptsMade"]),
            "age": age(_meta(job).dead_lettered_at, now=now),
            "dead-lettered at": row["deadLetteredAt"],
        })  # fmt: skip
    return columns.table(specs, rows, out, wide=wide)


def dead_letter_json(job: Job) -> dict[str, Any]:
    """``dlq show --json``: the payload as sent and every ``_dlqMeta`` field, times as ISO."""
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue_name,
        "payload": job.original_data,
        "deadLetter": _times_to_iso(_meta(job).to_json()),
    }


ATTEMPT_COLUMNS = (
    Column("#", 1, 2, "right"), Column("outcome", 4, 7), Column("worker", 6, 12),
    Column("started", 5, 24, no_wrap=True), Column("finished", 7, 24, no_wrap=True),
    Column("error type", 2, 10), Column("error", 3, 16, grow=True),
)  # fmt: skip


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


def attempts_table(attempts: list[AttemptRecord], out: Console, wide: bool) -> Table:
    rows: list[dict[str, RenderableType]] = [
        {"#": str(a.attempt), "outcome": a.outcome, "worker": Text(a.worker),
         "started": iso(a.started_at) or "", "finished": iso(a.finished_at) or "",
         "error type": Text(a.error_type), "error": Text(a.error)}
        for a in attempts
    ]  # fmt: skip
    return columns.table(ATTEMPT_COLUMNS, rows, out, wide=wide)[0]


def print_dead_letter(out: Console, job: Job, *, now: int, wide: bool = False) -> None:
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
    out.print(json_view(meta.original_opts))
    out.rule("payload")
    out.print(json_view(job.original_data))
    out.rule(f"timeline ({len(meta.timeline)})")
    out.print(_timeline_table(meta) if meta.timeline else "no status change yet")
    out.rule(f"attempts ({len(meta.attempts)})")
    out.print(attempts_table(meta.attempts, out, wide) if meta.attempts else "no attempt records")
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
