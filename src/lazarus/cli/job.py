"""``lazarus job``: act on one job of a queue by hand — retry it (failed), run it now
(delayed), change its data, priority or delay, cancel it (not ended), or remove it — or run
every delayed job of a queue now."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import click

from .._cancelling import DEFAULT_REASON, reason_value
from .._keys import validate_job_id
from ..errors import JobStateError
from ..job_options import MAX_DURATION_MS, MAX_PRIORITY
from ..operators import Operators
from ..queue import Queue
from . import _render
from ._options import (
    JSON_OPTION,
    QUEUE_ARGUMENT,
    emit_json,
    id_argument,
    open_queue,
    parse_payload,
    run,
)
from .main import PREFIX_OPTION, URL_OPTION


@click.group()
def job() -> None:
    """Act on one job of a queue (not a dead letter: see `lazarus dlq`), or run every
    delayed job of a queue now.

    \b
    Examples:
      lazarus job retry payments 42
      lazarus job promote payments 42
      lazarus job change payments 42 --priority 1
      lazarus job cancel payments 42 --reason "the customer withdrew"
      lazarus job remove payments 42
      lazarus job promote-all payments --dry-run
    """


async def _retry(queue: Queue, job_id: str) -> str:
    await queue.retry_job(job_id)
    return await queue.get_job_state(job_id)


async def _remove(queue: Queue, job_id: str) -> str:
    await queue.remove(job_id)
    return "removed"


def _command(verb: str, act: Callable[[Queue, str], Awaitable[str]], summary: str) -> click.Command:
    """``lazarus job <verb> QUEUE ID``: ``act`` on the job; prints the state it leaves it in."""

    @click.command(name=verb, help=summary)
    @click.argument("queue")
    @click.argument("job_id", metavar="ID")
    @JSON_OPTION
    @URL_OPTION
    @PREFIX_OPTION
    def command(queue: str, job_id: str, as_json: bool, redis_url: str, prefix: str) -> None:
        try:
            validate_job_id(job_id)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None

        async def work(ops: Operators) -> str:
            return await act(await open_queue(ops, queue), job_id)

        state = run(redis_url, prefix, work)
        if as_json:
            emit_json({"queue": queue, "id": job_id, "state": state})
            return
        _render.console().print(f"job {job_id} of {queue}: {state}")

    return command


job.add_command(_command(
    "retry", _retry,
    "Move failed job ID of QUEUE back to waiting with its attempts afresh (its failure "
    "history kept). Fails unless the job is failed.",
))  # fmt: skip
job.add_command(_command(
    "promote", Queue.promote_job,
    "Run delayed job ID of QUEUE now: it waits at once, its delay (or backoff) cut short. "
    "Fails unless the job is delayed.",
))  # fmt: skip
job.add_command(_command(
    "remove", _remove,
    "Remove job ID of QUEUE, with its logs. Fails while the job is active (its worker owns "
    "it).",
))  # fmt: skip


@job.command(name="promote-all")
@QUEUE_ARGUMENT
@click.option("--dry-run", is_flag=True, help="Count the delayed jobs only; change nothing.")
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def promote_all(queue_name: str, dry_run: bool, as_json: bool, redis_url: str, prefix: str) -> None:
    """Run every job of QUEUE that is delayed now at once, soonest due first, in bounded
    batches (as `promote` each); prints how many were promoted (with --dry-run, how many
    would be)."""

    async def work(ops: Operators) -> int:
        return await (await open_queue(ops, queue_name)).promote_jobs(dry_run=dry_run)

    count = run(redis_url, prefix, work)
    if as_json:
        emit_json({"queue": queue_name, "promoted": count, "dryRun": dry_run})
        return
    jobs = f"{count} delayed job{'s' if count != 1 else ''} of {queue_name}"
    _render.console().print(f"{jobs} would be promoted" if dry_run else f"promoted {jobs}")


@job.command()
@QUEUE_ARGUMENT
@id_argument()
@click.option(
    "--data",
    "data_json",
    metavar="JSON",
    help="The job's new data, any JSON value (null included).",
)
@click.option(
    "--priority",
    type=click.IntRange(0, MAX_PRIORITY),
    help="The job's new priority: 1 the highest, 0 none.",
)
@click.option(
    "--delay",
    type=click.IntRange(0, MAX_DURATION_MS),
    metavar="MS",
    help="Make a delayed job due MS milliseconds from now.",
)
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def change(
    queue_name: str, job_id: str, data_json: str | None, priority: int | None,
    delay: int | None, as_json: bool, redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """Change the data, priority and delay (those given) of job ID of QUEUE at once, where it
    is: all or none. A waiting job given a priority is placed again by it; a job in another
    state keeps it for when it is next ready. --delay takes a delayed job only. Fails for a
    dead letter (replay it with `lazarus dlq replay --data` instead). Prints the job's state
    afterwards.

    \b
    Examples:
      lazarus job change payments 42 --priority 1
      lazarus job change payments 42 --data '{"id": 7, "amount": 500}'
      lazarus job change payments 42 --delay 0
    """
    changes: dict[str, Any] = {}
    if data_json is not None:
        changes["data"] = parse_payload(data_json)
    if priority is not None:
        changes["priority"] = priority
    if delay is not None:
        changes["delay"] = delay
    if not changes:
        raise click.UsageError("nothing to change: give --data, --priority or --delay")

    async def work(ops: Operators) -> str:
        queue = await open_queue(ops, queue_name)
        try:
            return await queue.change_job(job_id, **changes)
        except (TypeError, ValueError) as exc:  # the library names the field: data
            field = next((f for f in changes if str(exc).startswith(f)), "data")
            raise click.BadParameter(str(exc), param_hint=f"'--{field}'") from None
        except JobStateError as exc:
            raise click.ClickException(str(exc)) from None

    state = run(redis_url, prefix, work)
    if as_json:
        emit_json({"queue": queue_name, "id": job_id, "state": state, "changed": list(changes)})
        return
    _render.console().print(f"job {job_id} of {queue_name}: {state} (changed {', '.join(changes)})")


# What a cancelled job's state means: when it fails (Queue.cancel_job)
CANCEL_NOTES = {
    "active": "its worker stops it at its next lease renewal",
    "waiting": "the next worker to claim it fails it without running it",
    "paused": "the next worker to claim it, once the queue is resumed, fails it without running it",
}


def _reason(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A click callback: ``value`` if ``cancel_job`` takes it as a reason."""
    try:
        return reason_value(value)
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


@job.command()
@QUEUE_ARGUMENT
@id_argument()
@click.option(
    "--reason", default=DEFAULT_REASON, show_default=True, callback=_reason,
    help="The message the job fails with (at most 4096 bytes of JSON).",
)  # fmt: skip
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def cancel(
    queue_name: str, job_id: str, reason: str, as_json: bool, redis_url: str, prefix: str
) -> None:
    """Cancel job ID of QUEUE, which has not ended: it fails with JobCancelledError, not
    retried, where its failures go (its dead letter queue with reason `cancelled`, or
    failed). A running job's worker stops it at its next lease renewal (within about a
    second: it looks for cancelled running jobs every 0.5 s); a job that waits, is
    prioritized or delayed is put first in line, and the next worker to claim it fails it
    without running it. Fails for a job that has ended. Prints the job's state afterwards.

    \b
    Examples:
      lazarus job cancel payments 42
      lazarus job cancel payments 42 --reason "the customer withdrew"
    """

    async def work(ops: Operators) -> str:
        return await (await open_queue(ops, queue_name)).cancel_job(job_id, reason)

    state = run(redis_url, prefix, work)
    if as_json:
        emit_json({"queue": queue_name, "id": job_id, "state": state, "reason": reason})
        return
    note = CANCEL_NOTES.get(state)
    told = f"job {job_id} of {queue_name}: {state}"
    _render.console().print(f"{told}: {note}" if note else told)
