"""A dead letter's status: the checks on who moves it and why, and the one script that moves
it (``set_dead_letter_status``, over ``store_set_status`` in ``includes/store.lua``, through
which every transition of every script goes).

Statuses: ``pending`` (waiting for a decision), ``manual`` (flagged for a human),
``processing`` (replayed; its new job has not finished), ``resolved`` (the replayed job
completed), ``failed`` (it kept failing after ``max_replays`` replays) and ``archived``
(discarded by an operator or by policy). Each change is recorded in the dead letter's timeline
with its time, actor and note.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import _moves, _scripts
from .._codec import text as _text
from .._connection import is_cluster, now_ms
from .._keys import QueueKeys, has_lone_surrogate, validate_job_id
from ..errors import error_for_code
from .filters import DeadLetterStatus

if TYPE_CHECKING:
    from .._connection import Client
MAX_NOTE_LENGTH = 2_000
MAX_ACTOR_LENGTH = 200
# Who changes a status: the redrive service, a named operator, or a policy (retention, rules).
_ACTOR = re.compile(r"^(redriver|policy|operator:[^\s\x00-\x1f\x7f-\x9f,]+)$")


def check_status(value: object, field: str = "status") -> DeadLetterStatus:
    """``value`` as a :class:`DeadLetterStatus`; raises naming ``field``."""
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a DeadLetterStatus or str, not {type(value).__name__}")
    try:
        return DeadLetterStatus(value)
    except ValueError:
        choices = ", ".join(s.value for s in DeadLetterStatus)
        raise ValueError(f"{field} must be one of {choices}, got {value!r}") from None


def check_actor(value: object) -> str:
    """``value`` if it is ``redriver``, ``policy`` or ``operator:<name>``; raises naming
    ``actor``."""
    if not isinstance(value, str):
        raise TypeError(f"actor must be a str, not {type(value).__name__}")
    if len(value) > MAX_ACTOR_LENGTH or has_lone_surrogate(value) or not _ACTOR.fullmatch(value):
        raise ValueError(
            f"actor must be 'redriver', 'policy' or 'operator:<name>' (a name without "
            f"whitespace or commas, at most {MAX_ACTOR_LENGTH} characters), got {value!r}"
        )
    return value


def check_note(value: object) -> str:
    """``value`` as stored ('' for ``None``); raises naming ``note``."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"note must be a str or None, not {type(value).__name__}")
    if not value or len(value) > MAX_NOTE_LENGTH or has_lone_surrogate(value):
        raise ValueError(
            f"note must be non-empty text of at most {MAX_NOTE_LENGTH} characters, or None"
        )
    return value


def check_expect(value: Iterable[DeadLetterStatus | str] | None) -> str:
    """The expected statuses as the script takes them (comma-separated; '' for any)."""
    if value is None:
        return ""
    if isinstance(value, str):  # a lone status is a common slip; one-element lists are meant
        raise TypeError("expect must be an iterable of statuses, not a str")
    try:
        statuses = [check_status(s, "expect") for s in value]
    except TypeError as error:
        if "expect must be" in str(error):
            raise
        raise TypeError(f"expect must be an iterable of statuses, not {value!r}") from None
    if not statuses:
        raise ValueError("expect must name at least one status, or be None")
    return ",".join(s.value for s in statuses)


async def set_status(
    client: Client,
    keys: QueueKeys,
    max_events: int,
    dead_letter_id: str,
    status: DeadLetterStatus | str,
    *,
    actor: str,
    note: str | None = None,
    expect: Iterable[DeadLetterStatus | str] | None = None,
) -> tuple[bool, str]:
    """Move one dead letter to ``status`` (every argument checked first): ``(True, previous
    status)`` when done, ``(False, current status)`` when it was not in an ``expect``-ed
    status; raises for a missing dead letter."""
    validate_job_id(dead_letter_id, "dead_letter_id")
    target, who = check_status(status), check_actor(actor)
    text, expected = check_note(note), check_expect(expect)
    reply = await _scripts.load("set_dead_letter_status")(
        client,
        [keys.dl, keys.events, keys.job(dead_letter_id)],
        [dead_letter_id, target.value, now_ms(), who, text, expected, max_events],
    )
    code = int(reply[0])
    if code < 0:
        raise error_for_code(code, f"set status of dead letter {dead_letter_id!r}")
    return code == 1, _text(reply[1])


async def settle_sample(client: Client, keys: QueueKeys, max_events: int, count: int) -> int:
    """Settle what needs it among ``count`` ``processing`` dead letters picked at random: a
    bounded step that workers take at each stall sweep, so that every dead letter is looked
    at sooner or later without anyone walking the whole index."""
    picked = await client.zrandmember(keys.dl_index("s", "processing"), count)
    if not picked:
        return 0
    return await _settle_ids(client, keys, max_events, [_text(i) for i in picked])


async def settle(client: Client, keys: QueueKeys, max_events: int, batch_size: int) -> int:
    """Settle the ``processing`` dead letters whose replayed job will never report back;
    returns how many moved. Walks the processing index in batches of ``batch_size``. First,
    on Redis Cluster, it finishes the replays into other slots that a crash cut short (their
    dead letters wait for a job that is still on its way), as the stall sweeps of this dead
    letter queue's workers do: a dead letter queue no worker names is looked after too."""
    if is_cluster(client):
        await _moves.sweep(client, keys, max_events)
    index, settled, start = keys.dl_index("s", "processing"), 0, 0
    while True:
        ids = [_text(i) for i in await client.zrange(index, start, start + batch_size - 1)]
        if not ids:
            return settled
        moved = await _settle_ids(client, keys, max_events, ids)
        settled += moved
        start += len(ids) - moved  # the settled ones left the index


async def settle_replay(
    client: Client, job_keys: QueueKeys, job_id: str, replay_of: object, replay_dlq: object,
    max_events: int,
) -> None:  # fmt: skip
    """Settle the dead letter that job ``job_id`` (of the queue of ``job_keys``) was a replay
    of, if that job will never report back: called right after the job was removed."""
    dlq = _queue_keys(job_keys.prefix, replay_dlq, replay_of)
    if dlq is None or replay_of is None:
        return
    dl_id = _text(replay_of)
    if _moves.crosses(client, job_keys, dlq):  # the job's fate is read in its own slot
        await _moves.settle(client, dlq, [(dl_id, job_id, job_keys)], max_events)
        return
    await _scripts.load("settle_dead_letters")(
        client,
        [dlq.dl, dlq.events, dlq.job(dl_id), job_keys.job(job_id), job_keys.completed,
         job_keys.failed],
        [now_ms(), max_events, dl_id, job_id],
    )  # fmt: skip


async def _settle_ids(client: Client, keys: QueueKeys, max_events: int, ids: list[str]) -> int:
    """Settle those of the dead letters ``ids`` whose replayed job will never report back."""
    async with client.pipeline(transaction=False) as pipe:
        for dl_id in ids:
            pipe.hmget(keys.job(dl_id), "dlq:replayJob", "dlq:replayQueue")
        found = await pipe.execute()
    script_keys: list[str] = [keys.dl, keys.events]
    args: list[object] = [now_ms(), max_events]
    across: list[tuple[str, str, QueueKeys]] = []  # replayed into another cluster slot
    for dl_id, (job_id, queue) in zip(ids, found):
        target = _queue_keys(keys.prefix, queue, job_id)
        if target is None:
            continue
        if _moves.crosses(client, keys, target):
            across.append((dl_id, _text(job_id), target))
            continue
        script_keys += [keys.job(dl_id), target.job(_text(job_id)), target.completed,
                        target.failed]  # fmt: skip
        args += [dl_id, _text(job_id)]
    settled = await _moves.settle(client, keys, across, max_events) if across else 0
    if len(script_keys) == 2:
        return settled
    return settled + int(await _scripts.load("settle_dead_letters")(client, script_keys, args))


def _queue_keys(prefix: str, queue: object, job_id: object) -> QueueKeys | None:
    if queue is None or job_id is None:
        return None
    try:
        validate_job_id(_text(job_id))
        return QueueKeys(prefix, _text(queue))
    except (TypeError, ValueError):
        return None
