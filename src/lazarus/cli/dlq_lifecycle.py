"""``lazarus dlq flag | reopen | archive | set-status | settle``: a dead letter's status, as an
operator moves it; and the options ``dlq replay`` takes to change what it replays."""

from __future__ import annotations

import getpass
import re
from collections.abc import Awaitable, Callable
from typing import Any

import click

from ..dead_letter import DeadLetterStatus
from ..dead_letter.lifecycle import MAX_ACTOR_LENGTH, check_actor, check_note
from ..operators import Operators
from ..queue import Queue
from . import _render
from ._options import (
    JSON_OPTION,
    QUEUE_ARGUMENT,
    check_queue_name,
    emit_json,
    id_argument,
    open_queue,
    run,
)
from .main import PREFIX_OPTION, URL_OPTION

_UNSAFE = re.compile(r"[\s,\x00-\x1f\x7f-\x9f]+")


def default_operator() -> str:
    """The operator a command acts as by default: the login name."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        name = "unknown"
    return _UNSAFE.sub("-", name) or "unknown"


def _check_operator(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A click callback: ``value`` if ``operator:<value>`` is an actor, else a usage error
    naming ``--operator`` (the library's error names ``actor``)."""
    try:
        check_actor(f"operator:{value}")
    except ValueError:
        longest = MAX_ACTOR_LENGTH - len("operator:")
        raise click.BadParameter(
            f"{value!r} must be a name without whitespace, commas or control characters, "
            f"at most {longest} characters", ctx, param,
        ) from None  # fmt: skip
    return value


def operator_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--operator", "operator", default=default_operator, show_default="the login name",
        callback=_check_operator, help="Who acts: recorded in the timeline as operator:<name>.",
    )(command)  # fmt: skip


def _check_note(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: ``value`` if it is a note, else a usage error naming ``--note``."""
    try:
        return None if value is None else check_note(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("note "), ctx, param) from None


NOTE_OPTION = click.option("--note", callback=_check_note, help="Why: recorded in the timeline.")


REPLAY_CHANGES: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option("--data", "data_json", metavar="JSON",
                 help="With an ID: replay this JSON payload instead of the stored one (the "
                      "old one is kept in the timeline)."),
    click.option("--to-queue", "to_queue", callback=check_queue_name,
                 help="With an ID: replay into this queue instead of the source queue."),
    NOTE_OPTION,
    operator_option,
]  # fmt: skip
"""The options of ``dlq replay`` that say what changes and who replays."""


def _act(
    queue_name: str, job_id: str, as_json: bool, redis_url: str, prefix: str, verb: str,
    call: Callable[[Queue], Awaitable[Any]],
) -> None:  # fmt: skip
    async def work(ops: Operators) -> dict[str, Any]:
        queue = await open_queue(ops, queue_name)
        await call(queue)
        job = await queue.peek_dead_letter(job_id)
        status = job.dead_letter.status if job and job.dead_letter else ""
        return {"queue": queue_name, "id": job_id, "action": verb, "status": str(status)}

    report = run(redis_url, prefix, work)
    if as_json:
        emit_json(report)
    else:
        _render.console().print(f"{verb} {job_id}: now {report['status']}")


def _status_command(name: str, verb: str, method: str, help_text: str) -> click.Command:
    @click.command(name, help=help_text)
    @QUEUE_ARGUMENT
    @id_argument()
    @NOTE_OPTION
    @operator_option
    @JSON_OPTION
    @URL_OPTION
    @PREFIX_OPTION
    def command(
        queue_name: str, job_id: str, note: str | None, operator: str, as_json: bool,
        redis_url: str, prefix: str,
    ) -> None:  # fmt: skip
        async def call(queue: Queue) -> None:
            await getattr(queue, method)(job_id, actor=f"operator:{operator}", note=note)

        _act(queue_name, job_id, as_json, redis_url, prefix, verb, call)

    return command


flag = _status_command(
    "flag", "flagged", "flag_dead_letter",
    "Flag a pending or failed dead letter for a human (status manual).\n\n"
    "Example: lazarus dlq flag payments-dlq 3f2a9c... --note 'needs billing'",
)  # fmt: skip
reopen = _status_command(
    "reopen", "reopened", "reopen_dead_letter",
    "Put a manual, failed, archived or resolved dead letter back to pending.\n\n"
    "Example: lazarus dlq reopen payments-dlq 3f2a9c...",
)  # fmt: skip
archive = _status_command(
    "archive", "archived", "archive_dead_letter",
    "Archive a dead letter: kept with its history and note, no longer live.\n\n"
    "Example: lazarus dlq archive payments-dlq 3f2a9c... --note 'customer refunded'",
)  # fmt: skip


@click.command("set-status")
@QUEUE_ARGUMENT
@id_argument()
@click.argument("status", type=click.Choice([s.value for s in DeadLetterStatus]))
@click.option("--expect", multiple=True, type=click.Choice([s.value for s in DeadLetterStatus]),
              help="Only if the dead letter is in this status now (repeatable).")  # fmt: skip
@NOTE_OPTION
@operator_option
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def set_status(
    queue_name: str, job_id: str, status: str, expect: tuple[str, ...], note: str | None,
    operator: str, as_json: bool, redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """Move a dead letter to STATUS (any of the six), recorded in its timeline.

    \b
    Example:
      lazarus dlq set-status payments-dlq 3f2a9c... manual --expect pending --note 'odd'
    """

    async def call(queue: Queue) -> None:
        changed = await queue.set_dead_letter_status(
            job_id, status, actor=f"operator:{operator}", note=note, expect=expect or None
        )
        if not changed:
            raise click.ClickException(
                f"dead letter {job_id!r} is not in {', '.join(expect)}: nothing changed"
            )

    _act(queue_name, job_id, as_json, redis_url, prefix, "set", call)


@click.command()
@QUEUE_ARGUMENT
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def settle(queue_name: str, as_json: bool, redis_url: str, prefix: str) -> None:
    """Settle processing dead letters whose replayed job will never report back (removed,
    or failed where no dead letter queue took it): back to pending, or resolved.

    Example: lazarus dlq settle payments-dlq
    """

    async def work(ops: Operators) -> int:
        return await (await open_queue(ops, queue_name)).settle_dead_letters()

    count = run(redis_url, prefix, work)
    if as_json:
        emit_json({"queue": queue_name, "settled": count})
    else:
        _render.console().print(f"settled {count} dead letter(s) of {queue_name!r}")


COMMANDS = (flag, reopen, archive, set_status, settle)
