"""``lazarus job show`` and ``lazarus queue jobs``: look at one job of a queue, or at a page
of its jobs in one state. The JSON has the fields of the HTTP API's job resource (built here:
the CLI runs without the server's packages)."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console, RenderableType
from rich.table import Table

from ..errors import JobNotFoundError
from ..job import Job, JobState
from ..operators import Operators
from . import _columns as columns
from . import _render
from ._options import (
    JSON_OPTION,
    QUEUE_ARGUMENT,
    WIDE_OPTION,
    emit_json,
    id_argument,
    open_queue,
    run,
)
from .main import PREFIX_OPTION, URL_OPTION

STATES = ("waiting", "prioritized", "delayed", "active", "completed", "failed")
MAX_LIMIT = 1000  # jobs one listing reads, at most


def job_json(found: Job, state: str) -> dict[str, Any]:
    """A job with the fields the HTTP API gives it (``GET /api/queues/{name}/jobs/{id}``)."""
    meta = found.dead_letter
    return {
        "id": found.id, "name": found.name, "queue": found.queue_name, "state": state,
        "data": found.original_data, "opts": found.opts.to_dict(), "priority": found.priority,
        "timestamp": found.timestamp, "expiresAt": found.expires_at,
        "attemptsMade": found.attempts_made, "maxAttempts": found.opts.attempts,
        "processedOn": found.processed_on, "finishedOn": found.finished_on,
        "failedReason": found.failed_reason, "errorType": found.error_type,
        "stacktrace": found.stacktrace, "attempts": [a.to_json() for a in found.attempts],
        "returnValue": found.return_value, "replayCount": found.replay_count,
        "deadLetter": None if meta is None else meta.to_json(),
    }  # fmt: skip


@click.command()
@QUEUE_ARGUMENT
@id_argument()
@JSON_OPTION
@WIDE_OPTION
@URL_OPTION
@PREFIX_OPTION
def show(
    queue_name: str, job_id: str, as_json: bool, wide: bool, redis_url: str, prefix: str
) -> None:
    """Show job ID of QUEUE: its state, times, options, payload, result, every failed
    attempt and every stack trace. A dead letter shows as a job of its dead letter queue
    (`lazarus dlq show` gives its dead letter metadata).

    \b
    Examples:
      lazarus job show payments 42
      lazarus job show payments 42 --json | jq .attempts
    """

    async def work(ops: Operators) -> tuple[Job, JobState]:
        q = await open_queue(ops, queue_name)
        found = await q.get_job(job_id)
        if found is None:
            raise JobNotFoundError(f"no job {job_id!r} in {queue_name!r}")
        return found, await q.get_job_state(job_id)

    found, state = run(redis_url, prefix, work)
    if as_json:
        emit_json(job_json(found, state))
    else:
        print_job(_render.console(), found, state, wide=wide)


def print_job(out: Console, found: Job, state: str, *, wide: bool = False) -> None:
    """``job show``: the job's facts, options, payload, result, attempts and stack traces."""
    iso = _render.iso
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    rows: list[tuple[str, str | None]] = [
        ("id", found.id), ("name", found.name), ("queue", found.queue_name), ("state", state),
        ("added at", iso(found.timestamp)), ("expires at", iso(found.expires_at)),
        ("started at", iso(found.processed_on)), ("finished at", iso(found.finished_on)),
        ("priority", str(found.priority) if found.priority else None),
        ("attempts made", f"{found.attempts_made} of {found.opts.attempts}"),
        ("error type", found.error_type), ("failed reason", found.failed_reason),
        ("replay of", found.replay_of),
    ]  # fmt: skip
    for label, value in rows:
        if value is not None:
            fields.add_row(label, _render.Text(value))
    out.print(fields)
    out.rule("options")
    out.print(_render.json_view(found.opts.to_dict()))
    out.rule("payload")
    out.print(_render.json_view(found.original_data))
    if found.return_value is not None:
        out.rule("result")
        out.print(_render.json_view(found.return_value))
    out.rule(f"attempts ({len(found.attempts)})")
    out.print(_render.attempts_table(found.attempts, out, wide) if found.attempts
              else "no failed attempt")  # fmt: skip
    for number, trace in enumerate(found.stacktrace, start=1):
        out.rule(f"stack trace {number} of {len(found.stacktrace)}")
        out.print(_render.Text(trace.rstrip("\n")))


JOB_COLUMNS = (
    columns.Column("id", 1, 8), columns.Column("name", 2, 8),
    columns.Column("failed reason", 3, 24, grow=True), columns.Column("attempts", 5, 8, "right"),
    columns.Column("added at", 4, 24, no_wrap=True),
    columns.Column("finished at", 6, 24, no_wrap=True),
)  # fmt: skip


@click.command()
@QUEUE_ARGUMENT
@click.option("--state", type=click.Choice(STATES), default="waiting", show_default=True,
              help="Which jobs (completed and failed: last finished first).")  # fmt: skip
@click.option("--start", default=0, show_default=True, type=click.IntRange(min=0),
              help="How many of them to skip.")  # fmt: skip
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, MAX_LIMIT),
              help="How many to show.")  # fmt: skip
@JSON_OPTION
@WIDE_OPTION
@URL_OPTION
@PREFIX_OPTION
def jobs(
    queue_name: str, state: str, start: int, limit: int, as_json: bool, wide: bool,
    redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """List the jobs of QUEUE in one state, a page at a time.

    \b
    Examples:
      lazarus queue jobs payments --state failed
      lazarus queue jobs payments --state delayed --start 20 --limit 20 --json
    """

    async def work(ops: Operators) -> list[Job]:
        q = await open_queue(ops, queue_name)
        read = getattr(q, f"get_{state}")
        found: list[Job] = await read(start, start + limit)  # one more: are there more?
        return found

    found = run(redis_url, prefix, work)
    page, more = found[:limit], len(found) > limit
    if as_json:
        emit_json({"queue": queue_name, "state": state, "start": start, "more": more,
                   "jobs": [job_json(j, state) for j in page]})  # fmt: skip
        return
    out = _render.console()
    rows: list[dict[str, RenderableType]] = [
        {"id": _render.Text(j.id), "name": _render.Text(j.name),
         "failed reason": _render.Text(_render.truncate(j.failed_reason or "", 200)),
         "attempts": f"{j.attempts_made}/{j.opts.attempts}",
         "added at": _render.iso(j.timestamp) or "",
         "finished at": _render.iso(j.finished_on) or ""}
        for j in page
    ]  # fmt: skip
    if not page:
        out.print(
            _render.Text(f"no {state} jobs in {queue_name}" + (" past --start" if start else ""))
        )
        return
    after = f"; more with --start {start + limit}" if more else ""
    out.print(_render.Text(f"{state} jobs {start + 1}-{start + len(page)} of {queue_name}{after}"))
    table, hidden = columns.table(JOB_COLUMNS, rows, out, wide=wide)
    out.print(table)
    note = columns.hidden_note(hidden)
    if note is not None:
        out.print(note)
