"""``lazarus job``: act on one job of a queue by hand — retry it (failed), run it now
(delayed) or remove it — or run every delayed job of a queue now."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import click

from .._keys import validate_job_id
from ..operators import Operators
from ..queue import Queue
from . import _render
from ._options import JSON_OPTION, QUEUE_ARGUMENT, emit_json, open_queue, run
from .main import PREFIX_OPTION, URL_OPTION


@click.group()
def job() -> None:
    """Act on one job of a queue (not a dead letter: see `lazarus dlq`), or run every
    delayed job of a queue now.

    \b
    Examples:
      lazarus job retry payments 42
      lazarus job promote payments 42
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
