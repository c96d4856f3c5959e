"""``lazarus job``: act on one job of a queue by hand — retry it (failed), run it now
(delayed) or remove it."""

from __future__ import annotations

import click

from .._keys import validate_job_id
from ..operators import Operators
from . import _render
from ._options import JSON_OPTION, emit_json, open_queue, run
from .main import PREFIX_OPTION, URL_OPTION


@click.group()
def job() -> None:
    """Act on one job of a queue (not a dead letter: see `lazarus dlq`).

    \b
    Examples:
      lazarus job retry payments 42
      lazarus job promote payments 42
      lazarus job remove payments 42
    """


def _act(verb: str, queue: str, job_id: str, as_json: bool, redis_url: str, prefix: str) -> None:
    try:
        validate_job_id(job_id)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    async def work(ops: Operators) -> str:
        target = await open_queue(ops, queue)
        if verb == "retry":
            await target.retry_job(job_id)
        elif verb == "promote":
            return await target.promote_job(job_id)
        else:
            await target.remove(job_id)
            return "removed"
        return await target.get_job_state(job_id)

    state = run(redis_url, prefix, work)
    if as_json:
        emit_json({"queue": queue, "id": job_id, "state": state})
        return
    _render.console().print(f"job {job_id} of {queue}: {state}")


def _command(verb: str, summary: str) -> click.Command:
    @click.command(name=verb, help=summary)
    @click.argument("queue")
    @click.argument("job_id", metavar="ID")
    @JSON_OPTION
    @URL_OPTION
    @PREFIX_OPTION
    def command(queue: str, job_id: str, as_json: bool, redis_url: str, prefix: str) -> None:
        _act(verb, queue, job_id, as_json, redis_url, prefix)

    return command


job.add_command(_command(
    "retry",
    "Move failed job ID of QUEUE back to waiting with its attempts afresh (its failure "
    "history kept). Fails unless the job is failed.",
))  # fmt: skip
job.add_command(_command(
    "promote",
    "Run delayed job ID of QUEUE now: it waits at once, its delay (or backoff) cut short. "
    "Fails unless the job is delayed.",
))  # fmt: skip
job.add_command(_command(
    "remove",
    "Remove job ID of QUEUE, with its logs. Fails while the job is active (its worker owns "
    "it).",
))  # fmt: skip
