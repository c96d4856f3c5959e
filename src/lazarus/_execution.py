"""One job's execution: run the processor, decide the outcome, record it with one script.

The outcome script also claims the worker's next job, so a busy worker needs one round trip
per job. Its call id is the id and lock token of the job it finishes; it remembers its reply in
the worker slot's memo: sent again after a dropped connection, it answers as the first run did.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from redis.asyncio import Redis

from . import _codec, _scripts
from ._connection import now_ms
from ._keys import QueueKeys
from .errors import DeadLetterError, UnrecoverableError, error_for_code
from .job import DeadLetterReason, Job, fields_from_reply

Processor = Callable[[Job], Any]


@dataclasses.dataclass(frozen=True)
class ClaimedJob:
    """A job this worker holds, with the lock token that proves it."""

    job: Job
    token: str

    @functools.cached_property
    def dead_letter_id(self) -> str:
        """The id a dead letter of this attempt gets: chosen once, so that every send of the
        outcome names the same one."""
        return uuid.uuid4().hex


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What happened to a job: ``completed``, ``retrying``, ``failed`` or ``dead_lettered``."""

    kind: str
    result: Any = None
    error: BaseException | None = None
    dead_letter_id: str | None = None


@dataclasses.dataclass(frozen=True)
class ExecutionContext:
    """Everything an execution needs from its worker; fixed for the worker's life."""

    client: Redis
    keys: QueueKeys
    dlq_keys: QueueKeys | None
    token_base: str
    lock_ms: int
    max_events: int
    executor: Executor | None


def parse_claimed(reply: Any, queue_name: str) -> ClaimedJob | None:
    """A claimed job from the ``{id, token, field, value, ...}`` a claim returns."""
    if not reply:
        return None
    items = [v.decode() if isinstance(v, bytes) else v for v in reply]
    job = Job.from_fields(str(items[0]), fields_from_reply(items[2:]), queue_name)
    return ClaimedJob(job, str(items[1]))


async def run_processor(processor: Processor, job: Job, executor: Executor | None) -> Any:
    """Run ``processor`` on ``job``: awaited if async, else in the worker's thread pool."""
    if inspect.iscoroutinefunction(processor):
        return await processor(job)
    result = await asyncio.get_running_loop().run_in_executor(executor, processor, job)
    if inspect.isawaitable(result):
        return await result
    return result


def format_stack(error: BaseException) -> str:
    """The traceback as Python prints it, without the caret lines: computing those re-parses
    every frame's source, which made formatting most of the cost of a failure."""
    lines = []
    for cause in _chain(error):
        lines.append("Traceback (most recent call last):\n")
        for frame in traceback.extract_tb(cause.__traceback__):
            lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n')
            if frame.line:
                lines.append(f"    {frame.line.strip()}\n")
        lines += traceback.format_exception_only(type(cause), cause)
    return "".join(lines)


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from, the first cause first."""
    chain = [error]
    while chain[-1].__cause__ is not None and len(chain) < 10:
        chain.append(chain[-1].__cause__)
    return chain[::-1]


def _failure_reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _terminal_reason(exc: BaseException, job: Job) -> DeadLetterReason | None:
    if isinstance(exc, DeadLetterError):
        return "discarded"
    if isinstance(exc, UnrecoverableError):
        return "unrecoverable"
    if job.attempts_made + 1 >= job.opts.attempts:
        return "attempts_exhausted"
    return None


async def finish(
    ctx: ExecutionContext, claimed: ClaimedJob, result: Any, error: BaseException | None,
    fetch_next: bool, slot: str,
) -> tuple[Outcome, ClaimedJob | None]:  # fmt: skip
    """Record the outcome of ``claimed`` and, with ``fetch_next``, claim the next job.

    ``slot`` names the worker slot whose reply memo the call uses; no other call of the
    worker may use it meanwhile.

    Raises :class:`~lazarus.errors.LockLostError` when the worker no longer owns the job.
    """
    job, now = claimed.job, now_ms()
    memo = ctx.keys.reply(ctx.token_base, slot)
    tail = [ctx.max_events, int(fetch_next), ctx.token_base, ctx.lock_ms]
    if error is None:
        try:
            value = _codec.encode(result, field="return value")
        except (TypeError, ValueError) as exc:
            error = exc
        else:
            policy = job.opts.keep_completed.args()
            reply = await _scripts.load("complete_job")(
                ctx.client,
                [*ctx.keys.group, ctx.keys.job(job.id), ctx.keys.completed, memo],
                [job.id, claimed.token, now, value, *policy, *tail],
            )
            return _next(ctx, job, reply, Outcome("completed", result=result))
    return await _fail(ctx, claimed, error, now, tail, memo)


async def _fail(
    ctx: ExecutionContext, claimed: ClaimedJob, error: BaseException, now: int, tail: list[Any],
    memo: str,
) -> tuple[Outcome, ClaimedJob | None]:  # fmt: skip
    job = claimed.job
    reason, error_type = _failure_reason(error), type(error).__name__
    stack = json.dumps(format_stack(error))
    attempt = json.dumps({
        "attempt": job.attempts_started, "startedAt": job.processed_on or now,
        "finishedAt": now, "worker": ctx.token_base, "outcome": "failed",
        "error": reason, "errorType": error_type,
    })  # fmt: skip
    failure = [reason, error_type, stack, attempt]
    terminal = _terminal_reason(error, job)
    job_keys = [*ctx.keys.group, ctx.keys.job(job.id)]
    if terminal is None:
        delay = job.opts.backoff.wait_ms(job.attempts_made + 1) if job.opts.backoff else 0
        reply = await _scripts.load("retry_job")(
            ctx.client, [*job_keys, memo], [job.id, claimed.token, now, delay, *failure, *tail]
        )
        return _next(ctx, job, reply, Outcome("retrying", error=error))
    if ctx.dlq_keys is None:
        policy = job.opts.keep_failed.args()
        reply = await _scripts.load("fail_job")(
            ctx.client, [*job_keys, ctx.keys.failed, memo],
            [job.id, claimed.token, now, *failure, *policy, *tail],
        )  # fmt: skip
        return _next(ctx, job, reply, Outcome("failed", error=error))
    dl_id = claimed.dead_letter_id
    dlq = ctx.dlq_keys
    reply = await _scripts.load("dead_letter_job")(
        ctx.client,
        [*job_keys, *dlq.dead_letter_group, dlq.job(dl_id), memo],
        [job.id, claimed.token, now, *failure, terminal, ctx.keys.queue, dlq.queue, dl_id,
         *tail],
    )  # fmt: skip
    return _next(ctx, job, reply, Outcome("dead_lettered", error=error, dead_letter_id=dl_id))


def _next(
    ctx: ExecutionContext, job: Job, reply: list[Any], outcome: Outcome
) -> tuple[Outcome, ClaimedJob | None]:
    code = int(reply[0])
    if code != 0:
        raise error_for_code(code, f"{outcome.kind} job {job.id!r} of {ctx.keys.queue!r}")
    return outcome, parse_claimed(reply[2], ctx.keys.queue)
