"""Replay and purge of given dead letters: one script call per batch, each dead letter moved or
deleted at most once whoever else races for it."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .. import _codec, _moves, _scripts
from .._connection import now_ms
from .._keys import QueueKeys, new_id, validate_name
from .._scripts import CALL_BUDGET_US
from ..job_options import MAX_PRIORITY, JobOptions
from .lifecycle import check_actor, check_note

if TYPE_CHECKING:
    from .._connection import Client
# What a replay changes of the original: opts JSON, priority, attempts, payload ('' keeps).
Override = list[str]
KEEP: Override = ["", "", "", ""]
DEFAULT_ACTOR = "operator:unnamed"
_FIRST_CALL, _MOST_PER_CALL = 100, 1_000  # dead letters sent in a call (see _in_budgeted_calls)
T = TypeVar("T")
UNCHANGED: Any = object()  # replay keeps the payload (None is a payload: JSON null)


@dataclasses.dataclass(frozen=True)
class Replayer:
    """Who replays, and why: recorded in each replayed dead letter's timeline."""

    actor: str = DEFAULT_ACTOR
    note: str = ""
    rule: str = ""

    def args(self) -> list[str]:
        return [self.actor, self.note, self.rule]


def check_replayer(actor: object, note: object, rule: object) -> Replayer:
    """Who replays, checked: raises naming ``actor``, ``note`` or ``rule``."""
    rule_name = "" if rule is None else validate_name(rule, "rule")
    return Replayer(check_actor(actor), check_note(note), rule_name)


async def overridden_options(
    client: Client, keys: QueueKeys, job_id: str, attempts: int | None, priority: int | None
) -> Override:
    """The replay arguments that change ``attempts`` and/or ``priority`` of a dead letter."""
    raw = await client.hget(keys.job(job_id), "dlq:originalOpts")
    opts = JobOptions.from_dict(_codec.decode(raw) or {})
    changed = dataclasses.replace(
        opts,
        attempts=opts.attempts if attempts is None else attempts,
        priority=opts.priority if priority is None else priority,
    )
    if changed.priority > MAX_PRIORITY:
        raise ValueError(f"priority must be at most {MAX_PRIORITY}")
    return [_codec.encode(changed.to_dict(), field="opts"), str(changed.priority),
            str(changed.attempts), ""]  # fmt: skip


async def replay(
    client: Client,
    keys: QueueKeys,
    max_events: int,
    target: str,
    items: list[tuple[str, Override]],
    *,
    register: bool = True,
    new_ids: list[str] | None = None,
    by: Replayer | None = None,
    budget_us: int = CALL_BUDGET_US,
    since: int | None = None,
    tally: str = "",
) -> list[tuple[str, str | int]]:
    """Replay ``(dead letter id, override)`` items into queue ``target``: for each, the new
    job's id and the state it entered, or an error code. ``register=False`` when the caller
    registered ``target`` already (a bulk run, once per target); ``by`` says who replays.
    ``new_ids`` names the new jobs (one per item; by default fresh ids), e.g. to give a job
    its original id back. ``budget_us`` bounds each script call (many items take several).
    ``since`` (ms): a dead letter replayed at or after it is left alone (``JOB_STATE``), as
    a bulk replay leaves what was replayed since it began. ``tally`` names a tally that
    counts the dead letters replayed (``''`` for none: see :mod:`.bulk`)."""
    target_keys = QueueKeys(keys.prefix, target)
    # Registered first: the registry is another key (another slot on a cluster), and a write
    # after the script could fail after the replay happened. Adding a name twice is harmless.
    if register:
        await client.sadd(target_keys.registry, target)
    if new_ids is None:
        new_ids = [new_id() for _ in items]
    elif len(new_ids) != len(items):
        raise ValueError(f"new_ids must have one id per item ({len(items)}), got {len(new_ids)}")
    head: list[Any] = [now_ms(), max_events, target, keys.queue, *(by or Replayer()).args(),
                       budget_us, "" if since is None else since, tally]  # fmt: skip
    crosses = _moves.crosses(client, keys, target_keys)  # another cluster slot: two steps

    async def call(part: Sequence[tuple[tuple[str, Override], str]]) -> list[Any]:
        args = list(head)
        for (dl_id, override), job_id in part:
            args += [dl_id, job_id, *override]
        if crosses:
            dl_keys = [keys.job(dl_id) for (dl_id, _override), _job_id in part]
            return await _moves.replay(client, keys, target_keys, dl_keys, args, max_events)
        script_keys = [keys.dl, keys.events, keys.meta, *target_keys.group]
        for (dl_id, _override), job_id in part:
            script_keys += [keys.job(dl_id), target_keys.job(job_id)]
        replies: list[Any] = await _scripts.load("replay_dead_letters")(client, script_keys, args)
        return replies

    results = await _in_budgeted_calls(list(zip(items, new_ids)), call)
    return [(new_id, _result(r)) for new_id, r in zip(new_ids, results)]


async def purge(
    client: Client,
    keys: QueueKeys,
    max_events: int,
    ids: list[str],
    statuses: str = "",
    *,
    budget_us: int = CALL_BUDGET_US,
    tally: str = "",
) -> list[int]:
    """Purge the dead letters ``ids`` (only those in ``statuses``, comma-separated, when
    given): 1 for each purged, else an error code. ``budget_us`` bounds each script call
    (many ids take several); ``tally`` names a tally that counts those purged (``''`` for
    none)."""
    script = _scripts.load("purge_dead_letters")

    async def call(part: Sequence[str]) -> list[Any]:
        script_keys = [keys.dl, keys.events, keys.meta, *(keys.job(i) for i in part)]
        replies: list[Any] = await script(
            client, script_keys, [max_events, statuses, budget_us, tally, *part]
        )
        return replies

    return [int(r) for r in await _in_budgeted_calls(ids, call)]


async def _in_budgeted_calls(
    items: Sequence[T], call: Callable[[Sequence[T]], Awaitable[list[Any]]]
) -> list[Any]:
    """One result per item, from script calls that each handle what their time budget allows
    of the items they are sent (at least one) and return one result per item handled. A call
    is sent about what the one before it managed, so that the budget, not the count, ends it,
    and no call carries many items it will not reach."""
    results: list[Any] = []
    size = _FIRST_CALL
    while len(results) < len(items):
        part = items[len(results) : len(results) + size]
        replies = await call(part)
        if not replies:  # never loop on nothing
            raise RuntimeError("a budgeted call handled none of the items it was sent")
        results += replies
        handled = len(replies)
        size = min(_MOST_PER_CALL, 2 * handled if handled == len(part) else handled * 5 // 4 + 1)
    return results


def _result(value: Any) -> str | int:
    if isinstance(value, int):
        return value
    return value.decode() if isinstance(value, bytes) else str(value)
