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
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any

from . import _codec, _moves, _scripts
from ._backoff import BackoffStrategy, retry_delay
from ._connection import Client, now_ms
from ._entry import NonRetryable, is_non_retryable
from ._failure import failed_attempt, failure_reason, format_stack
from ._keys import QueueKeys, new_dead_letter_id, validate_job_id
from .errors import (
    DeadLetterError,
    JobCancelledError,
    JobExpiredError,
    JobTimeoutError,
    RateLimitError,
    UnrecoverableError,
    error_for_code,
)
from .history import DeadLetterReason
from .job import Job, as_str, fields_from_reply
from .job_options import KEEP_ALL, JobOptions, KeepPolicy

if sys.version_info >= (3, 11):
    from asyncio import timeout as async_timeout
else:  # pragma: no cover - redis-py depends on async-timeout before 3.11.3
    from async_timeout import timeout as async_timeout  # type: ignore[import-not-found]

Processor = Callable[[Job], Any]


@dataclasses.dataclass(frozen=True)
class ClaimedJob:
    """A job this worker holds, with the lock token that proves it.

    ``undecodable`` is set when the stored job could not be read (its payload or options are
    not valid JSON): the job then has no data and is failed without running.
    """

    job: Job
    token: str
    undecodable: ValueError | None = None
    cancelled: str | None = None  # the reason of Queue.cancel_job: failed without running

    @functools.cached_property
    def dead_letter_id(self) -> str:
        """The id a dead letter of this attempt gets: chosen once, so that every send of the
        outcome names the same one."""
        return new_dead_letter_id()


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What happened to a job: ``completed``, ``retrying``, ``failed``, ``discarded``,
    ``dead_lettered`` or ``rate_limited`` (back in the queue, its attempt not spent)."""

    kind: str
    result: Any = None
    error: BaseException | None = None
    dead_letter_id: str | None = None


@dataclasses.dataclass(frozen=True)
class ExecutionContext:
    """Everything an execution needs from its worker; fixed for the worker's life."""

    client: Client
    keys: QueueKeys
    dlq_keys: QueueKeys | None
    token_base: str
    lock_ms: int
    max_events: int
    executor: Executor | None
    max_error_bytes: int
    max_stack_bytes: int
    backoff_strategy: BackoffStrategy | None = None
    non_retryable: tuple[NonRetryable, ...] = ()
    # The worker's remove_on_complete / remove_on_fail, for jobs that keep everything.
    keep_completed: KeepPolicy = dataclasses.field(default_factory=KeepPolicy)
    keep_failed: KeepPolicy = dataclasses.field(default_factory=KeepPolicy)


def kept(own: KeepPolicy, worker: KeepPolicy) -> KeepPolicy:
    """A job's retention once finished: its own, or its worker's when it keeps everything."""
    return worker if own is KEEP_ALL else own


def parse_claimed(reply: Any, queue_name: str) -> ClaimedJob | None:
    """A claimed job from the ``{id, token, field, value, ...}`` a claim returns.

    Never raises for what is stored: a job that cannot be read comes back ``undecodable``,
    so that one bad job can neither stop the worker nor hide the jobs claimed with it.
    """
    if not reply:
        return None
    job_id, token = as_str(reply[0]), as_str(reply[1])
    fields = fields_from_reply(reply[2:])
    cancelled = fields.get("cancel")
    try:
        job = Job.from_fields(job_id, fields, queue_name)
    except (ValueError, TypeError, KeyError) as exc:  # JSONDecodeError is a ValueError
        bare = _bare_job(job_id, fields, queue_name)
        return ClaimedJob(bare, token, _why_undecodable(exc), cancelled)
    return ClaimedJob(job, token, None, cancelled)


def _why_undecodable(exc: Exception) -> ValueError:
    error = ValueError(f"the stored job cannot be decoded: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


def _bare_job(job_id: str, fields: Mapping[str, str], queue_name: str) -> Job:
    """What can be read of a job that does not decode: its counters, name and raw bytes."""

    def number(field: str) -> int:
        try:
            return int(fields.get(field) or 0)
        except ValueError:
            return 0

    try:
        opts = JobOptions.from_dict(json.loads(fields.get("opts") or "{}"))
    except (ValueError, TypeError, AttributeError):
        opts = JobOptions()
    return Job._build(
        id=job_id, name=fields.get("name", ""), original_data=None, opts=opts,
        queue_name=queue_name, timestamp=number("timestamp"), priority=number("priority"),
        attempts_made=number("attemptsMade"), attempts_started=number("ats"),
        processed_on=number("processedOn") or None, raw_data=fields.get("data") or "null",
        opts_json=fields.get("opts") or "{}",
    )  # fmt: skip


async def run_processor(
    processor: Processor, job: Job, executor: Executor | None, timeout_ms: int | None
) -> Any:
    """Run ``processor`` on ``job``: awaited if async, else in the worker's thread pool.

    Past ``timeout_ms`` the processor is cancelled (an async one) or left to itself (a
    thread cannot be stopped) and :class:`~lazarus.JobTimeoutError` is raised.
    """
    if timeout_ms is None:
        return await _call(processor, job, executor)
    deadline = async_timeout(timeout_ms / 1000)
    try:
        async with deadline:
            return await _call(processor, job, executor)
    except asyncio.TimeoutError:  # the built-in TimeoutError from Python 3.11 on
        expired = deadline.expired
        if expired() if callable(expired) else expired:  # a method from 3.11, else a property
            raise JobTimeoutError(f"job exceeded its timeout of {timeout_ms} ms") from None
        raise  # the processor's own TimeoutError


async def _call(processor: Processor, job: Job, executor: Executor | None) -> Any:
    if inspect.iscoroutinefunction(processor):
        return await processor(job)
    result = await asyncio.get_running_loop().run_in_executor(executor, processor, job)
    if inspect.isawaitable(result):
        return await result
    return result


def _terminal_reason(
    exc: BaseException, job: Job, non_retryable: tuple[NonRetryable, ...]
) -> DeadLetterReason | None:
    if isinstance(exc, DeadLetterError):
        return "discarded"
    if isinstance(exc, JobCancelledError):
        return "cancelled"
    if isinstance(exc, JobExpiredError):
        return "expired"
    if isinstance(exc, UnrecoverableError) or is_non_retryable(exc, non_retryable):
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

    Raises :class:`~lazarus.errors.LockLostError` when the worker no longer owns the job,
    :class:`~lazarus.errors.JobNotFoundError` when it was removed meanwhile.
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
            policy = kept(job.opts.keep_completed, ctx.keep_completed).args()
            record = _replay_record(ctx, job)
            across = record if record and _moves.crosses(ctx.client, ctx.keys, record) else None
            record = None if across else record  # in another cluster slot: settled below
            # A replay whose dead letter is in another slot stays in `completed` until that is
            # resolved, even if removed on completion: a sweep settling the dead letter
            # meanwhile reads the job's fate there, and a job gone reads as removed.
            remove_after = across is not None and policy[2] == 1
            if remove_after:
                policy = [policy[0], policy[1], 0]
            record_keys = [] if record is None else [record.dl, record.events,
                                                     record.job(job.replay_of or "")]  # fmt: skip
            reply = await _scripts.load("complete_job")(
                ctx.client,
                [*ctx.keys.group, ctx.keys.job(job.id), ctx.keys.completed, memo, *record_keys],
                [job.id, claimed.token, now, value, *policy, *tail,
                 job.replay_of if record else ""],
            )  # fmt: skip
            if across is not None and int(reply[0]) == 0:
                settled = await _moves.resolve(
                    ctx.client,
                    across,
                    job.replay_of or "",
                    ctx.keys,
                    job.id,
                    ctx.max_events,
                    _moves_within(ctx),
                )
                if settled and remove_after:
                    await _moves.remove_completed(ctx.client, ctx.keys, job.id, ctx.max_events)
            return _next(ctx, job, reply, Outcome("completed", result=result))
    return await _fail(ctx, claimed, error, now, tail, memo)


async def _fail(
    ctx: ExecutionContext, claimed: ClaimedJob, error: BaseException, now: int, tail: list[Any],
    memo: str,
) -> tuple[Outcome, ClaimedJob | None]:  # fmt: skip
    job = claimed.job
    if isinstance(error, RateLimitError) and claimed.undecodable is None:
        reply = await _scripts.load("postpone_job")(
            ctx.client, [*ctx.keys.group, ctx.keys.job(job.id), memo],
            [job.id, claimed.token, now, error.retry_after_ms, *tail],
        )  # fmt: skip
        return _next(ctx, job, reply, Outcome("rate_limited", error=error))
    reason, error_type = failure_reason(error, ctx.max_error_bytes), type(error).__name__
    stack = json.dumps(
        format_stack(error, max_message_bytes=ctx.max_error_bytes, max_bytes=ctx.max_stack_bytes)
    )
    attempt = failed_attempt(
        job.attempts_started, job.processed_on or now, now, ctx.token_base, reason, error_type
    )
    failure = [reason, error_type, stack, attempt]
    terminal = (
        "undecodable" if claimed.undecodable
        else _terminal_reason(error, job, ctx.non_retryable)
    )  # fmt: skip
    job_keys = [*ctx.keys.group, ctx.keys.job(job.id)]
    if terminal is None:
        delay = retry_delay(job, error, ctx.backoff_strategy)
        reply = await _scripts.load("retry_job")(
            ctx.client, [*job_keys, memo], [job.id, claimed.token, now, delay, *failure, *tail]
        )
        return _next(ctx, job, reply, Outcome("retrying", error=error))
    # A replayed job goes back to the dead letter queue its dead letter waits in.
    record = _replay_record(ctx, job)
    dlq = record or ctx.dlq_keys
    exhaustion = job.opts.on_exhaustion
    if dlq is None or exhaustion in ("fail", "discard"):
        policy = kept(job.opts.keep_failed, ctx.keep_failed).args()
        discard = exhaustion == "discard"
        reply = await _scripts.load("fail_job")(
            ctx.client, [*job_keys, ctx.keys.failed, memo],
            [job.id, claimed.token, now, *failure, *policy, *tail, int(discard)],
        )  # fmt: skip
        kind = "discarded" if discard else "failed"
        return _next(ctx, job, reply, Outcome(kind, error=error))
    dl_id = claimed.dead_letter_id
    args = [job.id, claimed.token, now, *failure, terminal, ctx.keys.queue, dlq.queue, dl_id,
            *tail]  # fmt: skip
    if _moves.crosses(ctx.client, ctx.keys, dlq):  # another cluster slot: two steps
        reply = await _moves.dead_letter(
            ctx.client, ctx.keys, dlq, job_keys, memo, args, ctx.max_events, _moves_within(ctx)
        )
    else:
        reply = await _scripts.load("dead_letter_job")(
            ctx.client, [*job_keys, *dlq.dead_letter_group, dlq.job(dl_id), memo], args
        )
    # A replay goes back into its own dead letter (unless that one stopped waiting for it:
    # then the events stream names the new dead letter).
    holder = job.replay_of if record is not None and job.replay_of else dl_id
    return _next(ctx, job, reply, Outcome("dead_lettered", error=error, dead_letter_id=holder))


def _moves_within(ctx: ExecutionContext) -> float:
    """Seconds the steps of a move to another cluster slot may take after an outcome: a third
    of the lease of the job the outcome claimed next, which is renewed only once they end."""
    return ctx.lock_ms / 3000


def _replay_record(ctx: ExecutionContext, job: Job) -> QueueKeys | None:
    """The keys of the dead letter queue that holds the dead letter ``job`` is a replay of, or
    ``None`` (not a replay, or a reference that cannot name a key)."""
    if not job.replay_of or not job.replay_dead_letter_queue:
        return None
    try:
        validate_job_id(job.replay_of)
        return QueueKeys(ctx.keys.prefix, job.replay_dead_letter_queue)
    except (TypeError, ValueError):
        return None


def _next(
    ctx: ExecutionContext, job: Job, reply: list[Any], outcome: Outcome
) -> tuple[Outcome, ClaimedJob | None]:
    code = int(reply[0])
    if code != 0:
        raise error_for_code(code, f"{outcome.kind} job {job.id!r} of {ctx.keys.queue!r}")
    return outcome, parse_claimed(reply[2], ctx.keys.queue)
