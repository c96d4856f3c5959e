"""``lazarus dlq ...``: list (in :mod:`.dlq_list`), show, find-original, stats, replay,
purge; flag, reopen, archive, set-status and settle (in :mod:`.dlq_lifecycle`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..dead_letter import DeadLetterFilter, DeadLetterStats
from ..dead_letter.bulk import BULK_BATCH
from ..errors import JobNotFoundError, NotADeadLetterError
from ..job import Job
from ..operators import Operators
from ..queue import Queue
from . import _render
from ._bulk import PAST, BulkPlan, Verb, run_bulk
from ._options import (
    JSON_OPTION,
    QUEUE_ARGUMENT,
    WIDE_OPTION,
    check_job_id,
    check_queue_name,
    emit_json,
    filter_options,
    id_argument,
    open_queue,
    parse_payload,
    run,
)
from .dlq_lifecycle import COMMANDS, REPLAY_CHANGES
from .dlq_list import list_dead_letters
from .main import PREFIX_OPTION, URL_OPTION


@click.group()
def dlq() -> None:
    """Inspect, replay and purge dead letters.

    QUEUE is always the dead letter queue (the one workers were given as
    --dead-letter-queue), not the queue the jobs failed in.
    """


async def _dead_letter(queue: Queue, job_id: str) -> Job:
    job = await queue.peek_dead_letter(job_id)
    if job is None:
        raise JobNotFoundError(f"no dead letter {job_id!r} in {queue.name!r}")
    if job.dead_letter is None:
        raise NotADeadLetterError(f"job {job_id!r} in {queue.name!r} is not a dead letter")
    return job


dlq.add_command(list_dead_letters)
for _command in COMMANDS:
    dlq.add_command(_command)


@dlq.command()
@QUEUE_ARGUMENT
@id_argument()
@JSON_OPTION
@WIDE_OPTION
@URL_OPTION
@PREFIX_OPTION
def show(
    queue_name: str, job_id: str, as_json: bool, wide: bool, redis_url: str, prefix: str
) -> None:
    """Show one dead letter: its metadata, payload, every attempt and every stack trace.

    \b
    Examples:
      lazarus dlq show payments-dlq 3f2a9c...
      lazarus dlq show payments-dlq 3f2a9c... --json | jq .payload
    """

    async def work(ops: Operators) -> Job:
        return await _dead_letter(await open_queue(ops, queue_name), job_id)

    job = run(redis_url, prefix, work)
    if as_json:
        emit_json(_render.dead_letter_json(job))
    else:
        _render.print_dead_letter(_render.console(), job, now=_render.now_ms(), wide=wide)


@dlq.command("find-original")
@click.argument("job_id", metavar="JOB_ID", callback=check_job_id)
@click.option("--queue", "queue_name", callback=check_queue_name,
              help="Look in this dead letter queue only (default: every one).")  # fmt: skip
@JSON_OPTION
@WIDE_OPTION
@URL_OPTION
@PREFIX_OPTION
def find_original(
    job_id: str, queue_name: str | None, as_json: bool, wide: bool, redis_url: str, prefix: str
) -> None:
    """Find the dead letter of the job whose id was JOB_ID in its source queue ("where did
    job X go?") and show it as `dlq show` does.

    Every dead letter queue of the prefix is searched unless --queue names one.

    \b
    Examples:
      lazarus dlq find-original 5b1e7c...
      lazarus dlq find-original 5b1e7c... --queue payments-dlq --json | jq .id
    """

    async def work(ops: Operators) -> Job:
        if queue_name is None:
            job = await ops.view.find_by_original_id(job_id)
            where = f"any dead letter queue under prefix {ops.prefix!r}"
        else:
            job = await (await open_queue(ops, queue_name)).find_dead_letter_by_original_id(job_id)
            where = repr(queue_name)
        if job is None or job.dead_letter is None:
            raise JobNotFoundError(f"no dead letter of job {job_id!r} in {where}")
        return job

    job = run(redis_url, prefix, work)
    if as_json:
        emit_json(_render.dead_letter_json(job))
    else:
        _render.print_dead_letter(_render.console(), job, now=_render.now_ms(), wide=wide)


@dlq.command()
@QUEUE_ARGUMENT
@filter_options
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def stats(
    queue_name: str, flt: DeadLetterFilter, as_json: bool, redis_url: str, prefix: str
) -> None:
    """Totals of the dead letters in QUEUE that match the filters: by job name, error type,
    source queue, reason and status, with the oldest and newest.

    \b
    Examples:
      lazarus dlq stats payments-dlq
      lazarus dlq stats payments-dlq --since 1d --json
    """

    async def work(ops: Operators) -> DeadLetterStats:
        return await (await open_queue(ops, queue_name)).get_dead_letter_stats(flt)

    result = run(redis_url, prefix, work)
    if as_json:
        emit_json(_render.stats_json(queue_name, result))
    else:
        _render.print_stats(_render.console(), queue_name, result, now=_render.now_ms())


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _rate_option(verb: Verb) -> Decorator:
    return click.option(
        "--rate", type=click.FloatRange(min=0, min_open=True),
        help=f"With --all: {verb} about this many dead letters per second.",
    )  # fmt: skip


def _bulk_command(verb: Verb, *extra: Decorator) -> Decorator:
    """The arguments and options replay and purge share, with ``extra`` options after --yes."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        decorators: list[Decorator] = [
            QUEUE_ARGUMENT, id_argument(required=False),
            click.option("--all", "all_", is_flag=True,
                         help=f"{verb.capitalize()} every dead letter matching the filters."),
            filter_options,
            click.option("--dry-run", is_flag=True,
                         help=f"Show what would be {PAST[verb]}; change nothing."),
            click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
            *extra,
            click.option("--as-of", type=click.IntRange(min=0), metavar="MS",
                         help=f"With --all: resume a {verb} that stopped half-way (its process "
                              "killed): the 'as of' it printed. Nothing is done twice."),
            click.option("--batch-size", default=BULK_BATCH, show_default=True,
                         type=click.IntRange(1, 5000), help="Dead letters per Redis call."),
            JSON_OPTION, URL_OPTION, PREFIX_OPTION,
        ]  # fmt: skip
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return decorate


def _check_target(job_id: str | None, all_: bool, flt: DeadLetterFilter) -> None:
    if (job_id is None) == (not all_):
        raise click.UsageError("give either a dead letter ID or --all (with filters)")
    if job_id is not None and flt != DeadLetterFilter():
        raise click.UsageError("filters select dead letters for --all; with an ID give none")


def _single(
    verb: Verb, queue_name: str, job_id: str, dry_run: bool, changes: dict[str, Any]
) -> Any:
    """The async work of replaying (with ``changes``: replay_dead_letter's keywords) or
    purging one dead letter by id."""

    async def work(ops: Operators) -> dict[str, Any]:
        queue = await open_queue(ops, queue_name)
        job = await _dead_letter(queue, job_id)
        source = job.dead_letter.source_queue if job.dead_letter else ""
        report: dict[str, Any] = {
            "queue": queue_name, "action": verb, "dryRun": dry_run,
            "id": job_id, "name": job.name, "sourceQueue": source,
        }  # fmt: skip
        if dry_run:
            return report
        if verb == "replay":
            report["newJobId"] = await queue.replay_dead_letter(job_id, **changes)
            report["targetQueue"] = changes.get("queue") or source
        else:
            await queue.purge_dead_letter(job_id)
        return report

    return work


def _print_single(report: dict[str, Any]) -> None:
    what = f"{report['id']} ({report['name']})"
    if report["dryRun"]:
        line = f"dry run: would {report['action']} {what}; nothing was changed"
    elif report["action"] == "replay":
        line = f"replayed {what} into {report['targetQueue']!r} as job {report['newJobId']}"
    else:
        line = f"purged {what} from {report['queue']!r}"
    _render.console().print(line)


@dlq.command()
@_bulk_command("replay", _rate_option("replay"), *REPLAY_CHANGES)
def replay(
    queue_name: str, job_id: str | None, all_: bool, flt: DeadLetterFilter, dry_run: bool,
    yes: bool, rate: float | None, data_json: str | None, to_queue: str | None,
    note: str | None, operator: str, as_of: int | None, batch_size: int, as_json: bool,
    redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """Replay one dead letter (ID) or all that match the filters (--all) into their source
    queues, as new jobs with the same payload and options and a fresh set of attempts.

    Each replayed dead letter becomes processing until its new job completes (resolved) or
    fails again (back to pending). With an ID, --data replays a changed payload and --to-queue
    replays into another queue.

    For --all, the matches are counted first; --dry-run stops there. Otherwise you are asked
    to confirm (--yes skips that; without a terminal, --yes is required).

    \b
    Examples:
      lazarus dlq replay payments-dlq 3f2a9c...
      lazarus dlq replay payments-dlq 3f2a9c... --data '{"id": 7, "amount": 500}' --note fixed
      lazarus dlq replay payments-dlq 3f2a9c... --to-queue payments-review
      lazarus dlq replay payments-dlq --all --error-type TimeoutError --since 2h --dry-run
      lazarus dlq replay payments-dlq --all --error-type TimeoutError --since 2h --rate 50 --yes
      lazarus dlq replay payments-dlq --all --error-type TimeoutError --since 2h --yes \\
          --as-of 1764410000000
    """
    _check_target(job_id, all_, flt)
    if job_id is None and (data_json is not None or to_queue is not None):
        raise click.UsageError("--data and --to-queue replay one dead letter: give its ID")
    changes: dict[str, Any] = {"actor": f"operator:{operator}", "note": note}
    if data_json is not None:
        changes["data"] = parse_payload(data_json)
    if to_queue is not None:
        changes["queue"] = to_queue
    _run_action("replay", queue_name, job_id, flt, dry_run, yes, batch_size, rate, as_json,
                redis_url, prefix, changes, as_of)  # fmt: skip


@dlq.command()
@_bulk_command("purge", _rate_option("purge"))
def purge(
    queue_name: str, job_id: str | None, all_: bool, flt: DeadLetterFilter, dry_run: bool,
    yes: bool, rate: float | None, as_of: int | None, batch_size: int, as_json: bool,
    redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """Delete one dead letter (ID) or all that match the filters (--all), for good.

    For --all, the matches are counted first; --dry-run stops there. Otherwise you are asked
    to confirm (--yes skips that; without a terminal, --yes is required).

    \b
    Examples:
      lazarus dlq purge payments-dlq 3f2a9c...
      lazarus dlq purge payments-dlq --all --name legacy-sync --until 30d --yes
    """
    _check_target(job_id, all_, flt)
    _run_action("purge", queue_name, job_id, flt, dry_run, yes, batch_size, rate, as_json,
                redis_url, prefix, {}, as_of)  # fmt: skip


def _run_action(
    verb: Verb, queue_name: str, job_id: str | None, flt: DeadLetterFilter, dry_run: bool,
    yes: bool, batch_size: int, rate: float | None, as_json: bool, redis_url: str, prefix: str,
    changes: dict[str, Any], as_of: int | None,
) -> None:  # fmt: skip
    if job_id is not None and as_of is not None:
        raise click.UsageError("--as-of resumes a run of --all; with an ID give none")
    if job_id is not None:
        report = run(redis_url, prefix, _single(verb, queue_name, job_id, dry_run, changes))
        if not as_json:
            _print_single(report)
    else:
        plan = BulkPlan(verb, queue_name, flt, dry_run, yes, batch_size, rate, as_json, changes,
                        as_of)  # fmt: skip

        async def work(ops: Operators) -> dict[str, Any]:
            return await run_bulk(ops, plan)

        report = run(redis_url, prefix, work)
    if as_json:
        emit_json(report)
