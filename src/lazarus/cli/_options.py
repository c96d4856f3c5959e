"""What the operator commands share: the dead-letter filter options, time parsing, one event
loop per command with an :class:`~lazarus.operators.Operators`, and clean error messages.

Every command does its work in one ``asyncio.run`` of ``run(redis_url, prefix, work)``;
library errors (Redis unreachable, unknown job, not a dead letter) leave it as a one-line
``click.ClickException`` (exit 1), bad option values as a usage error naming the option (exit 2).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, get_args

import click
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._keys import validate_job_id, validate_queue_name
from ..dead_letter import DeadLetterFilter, DeadLetterStatus
from ..errors import LazarusError
from ..history import DeadLetterReason
from ..operators import Operators
from ..queue import Queue

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(?:\d+[smhdw])+")
_DURATION_PART = re.compile(r"(\d+)([smhdw])")


def parse_time(text: str, *, now: datetime.datetime) -> datetime.datetime | None:
    """An aware datetime for ``text``: ISO 8601 (UTC when naive) or a duration before ``now``
    such as ``30m``, ``2h``, ``7d`` or ``1h30m``; ``None`` when it is neither."""
    text = text.strip()
    if _DURATION.fullmatch(text):
        seconds = sum(int(n) * _UNITS[unit] for n, unit in _DURATION_PART.findall(text))
        return now - datetime.timedelta(seconds=seconds)
    if text[-1:] in ("Z", "z"):  # fromisoformat reads "Z" only from Python 3.11 on
        text = text[:-1] + "+00:00"
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)


if TYPE_CHECKING:  # click >= 8.2 types its ParamType; older clicks cannot subscript it
    _TimeParamBase = click.ParamType[datetime.datetime, Any]
else:
    _TimeParamBase = click.ParamType


class TimeType(_TimeParamBase):
    """An ISO 8601 time or a relative duration (``2h``: two hours ago)."""

    name = "TIME"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime.datetime:
        if isinstance(value, datetime.datetime):
            return value
        try:
            parsed = parse_time(str(value), now=datetime.datetime.now(datetime.timezone.utc))
        except OverflowError:  # a duration that reaches back past what datetime holds
            self.fail(f"{value!r} reaches back before the year 1", param, ctx)
        if parsed is None:
            self.fail(
                f"{value!r} is neither an ISO 8601 time (2025-01-15T10:30:00Z) "
                "nor a duration like 30m, 2h or 7d",
                param,
                ctx,
            )
        return parsed


def _one_field(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A click callback: ``value`` if the filter takes it for this field, else a usage
    error naming the option (not the filter's field, nor another option)."""
    if value is not None and param.name is not None:
        try:
            DeadLetterFilter(**{param.name: value})
        except (TypeError, ValueError) as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return value


_FILTER_OPTIONS: list[tuple[str, Callable[[F], F]]] = [
    ("name", click.option("--name", callback=_one_field, help="Job name, exactly.")),
    ("name_prefix", click.option("--name-prefix", callback=_one_field,
                                 help="Job name starts with this.")),
    ("error_type", click.option("--error-type", callback=_one_field,
                                help="Exception class name, exactly.")),
    ("failed_reason", click.option("--failed-reason", callback=_one_field,
                                   help="Last error message contains this (any case).")),
    ("source_queue", click.option("--source-queue", callback=_one_field,
                                  help="Queue the job died in.")),
    ("reason", click.option("--reason", type=click.Choice(get_args(DeadLetterReason)),
                            help="Why it was dead-lettered.")),
    ("since", click.option("--since", type=TimeType(),
                           help="Dead-lettered at or after: ISO time or 30m / 2h / 7d ago.")),
    ("until", click.option("--until", type=TimeType(),
                           help="Dead-lettered at or before: ISO time or 30m / 2h / 7d ago.")),
    ("payload_contains", click.option(
        "--contains", "payload_contains", callback=_one_field,
        help='Payload JSON text contains this, literally (compact JSON: {"a":1}).')),
    ("status", click.option("--status", type=click.Choice([s.value for s in DeadLetterStatus]),
                            help="Where the dead letter stands in its lifecycle.")),
]  # fmt: skip


def filter_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the filter options to ``command``, which receives them as one ``flt`` argument."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {field: kwargs.pop(field) for field, _ in _FILTER_OPTIONS}
        try:
            kwargs["flt"] = DeadLetterFilter(**values)
        except ValueError as exc:  # each option alone was checked: since after until
            raise click.BadParameter(str(exc), param_hint="'--since' / '--until'") from None
        return command(*args, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for _, option in reversed(_FILTER_OPTIONS):
        decorated = option(decorated)
    return decorated


def check_queue_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: ``value`` if it is a valid queue name (or ``None``)."""
    try:
        return None if value is None else validate_queue_name(value, "queue")
    except ValueError as exc:
        # An optional argument's metavar is "[QUEUE]"; the error names it as "QUEUE".
        hint = "'QUEUE'" if isinstance(param, click.Argument) else None
        raise click.BadParameter(str(exc), ctx, param, param_hint=hint) from None


def check_job_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    try:
        return None if value is None else validate_job_id(value, "id")
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


QUEUE_ARGUMENT = click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
WIDE_OPTION = click.option(
    "--wide", is_flag=True,
    help="Every column, unwrapped, however wide (by default, what fits the terminal).",
)  # fmt: skip


def id_argument(*, required: bool = True) -> Callable[[F], F]:
    """The ``ID`` of a dead letter."""
    metavar = "ID" if required else "[ID]"
    return click.argument("job_id", metavar=metavar, required=required, callback=check_job_id)


def run(redis_url: str, prefix: str, work: Callable[[Operators], Awaitable[T]]) -> T:
    """Run ``work`` in one event loop with its own :class:`Operators`, closed afterwards."""

    async def session() -> T:
        try:
            ops = Operators(connection=redis_url, prefix=prefix)
        except ValueError as exc:
            raise click.UsageError(f"{exc}; check --redis-url and --prefix") from None
        try:
            return await work(ops)
        finally:
            await ops.close()

    try:
        return asyncio.run(session())
    except (ConnectionError, RedisConnectionError, RedisTimeoutError) as exc:
        raise click.ClickException(str(exc)) from None
    except LazarusError as exc:
        raise click.ClickException(str(exc)) from None


async def open_queue(ops: Operators, name: str) -> Queue:
    """The queue called ``name``, or a clean error if there is no such queue.

    A queue exists when it is registered (``list_queues``) or has dead-letter metadata: a DLQ
    that workers of an older lazarus filled without registering it is still found.
    """
    if name in await ops.queue_names() or (await ops.summary(name)).is_dead_letter_queue:
        return ops.queue(name)
    raise click.ClickException(
        f"no queue {name!r} under prefix {ops.prefix!r} (`lazarus queues` lists them)"
    )


_C1 = re.compile("[\x7f-\x9f]")


def emit_json(document: Any) -> None:
    """Print ``document`` as one JSON document on stdout. JSON escapes C0 control characters;
    DEL and the C1 ones (a terminal reads ``\\x9b`` as an escape sequence) are escaped too."""
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    click.echo(_C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def stdin_is_interactive() -> bool:
    """Whether a person can answer a confirmation prompt."""
    return sys.stdin is not None and sys.stdin.isatty()


def confirm(what: str, *, yes: bool) -> None:
    """Ask before doing ``what`` (``"purge 42 dead letters in 'payments-dlq'"``); refuse
    outright when nobody can answer and ``--yes`` was not given. A blocking prompt is fine
    inside a command's ``work``: nothing else runs on its event loop."""
    if yes:
        return
    if not stdin_is_interactive():
        raise click.ClickException(
            f"refusing to {what} without confirmation: stdin is not a terminal. "
            "Pass --yes to go ahead, or --dry-run to preview."
        )
    click.confirm(f"{what[:1].upper()}{what[1:]}?", abort=True, err=True)


def parse_payload(text: str | None) -> Any:
    """The JSON text of ``--data`` as a value; a clean usage error when it is not JSON."""
    try:
        return json.loads(text) if text is not None else None
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--data") from None
