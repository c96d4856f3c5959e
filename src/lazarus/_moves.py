"""Moves of a job to a queue in another Redis Cluster slot (to a dead letter queue, or back
on replay): the crash-safe two-step.

One script cannot write keys of two slots, so dead-lettering across slots takes three
calls (docs/redis-cluster.md); a replay likewise (``replay_out`` in the dead letter queue's
slot marks the dead letter processing and records its new job, ``replay_in`` adds the job):

1. In the source queue's slot, the script that releases the job (``dead_letter_out``, or
   ``sweep_stalled`` for a job stalled too often) deletes it and records the move in the
   queue's ``moves`` hash, under the dead letter's id, in the same step. The source's
   ``failed`` and ``deadLettered`` events are emitted there, so once.
2. In the dead letter queue's slot, ``dead_letter_in`` adds the dead letter under that id,
   unless it added that move before (it remembers the moves it took in).
3. The ``moves`` entry is deleted.

A crash after step 1 leaves the entry: :func:`sweep` (run with every stall sweep of a
worker on the source queue, at start-up and then periodically) does steps 2 and 3 for it.
Step 2 twice adds nothing twice, so a sweep racing the worker that is finishing the same
move is harmless: the job is in exactly one place, never none.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster

from . import _scripts
from ._connection import Client, now_ms
from ._keys import QueueKeys
from .errors import ErrorCode

log = logging.getLogger("lazarus.moves")

SWEEP_BATCH = 100
IN_TRANSIT = "job:"
"""Beside the move of a replayed job, the field ``job:<job id>`` of the moves hash marks the
job in transit (includes/move_out.lua), so that its dead letter is not settled meanwhile."""
SWEEP_MIN_AGE_MS = 2_000
# Where the six arguments of each dead letter begin in a replay call's arguments (ARGV[11] of
# replay_dead_letters.lua and replay_out.lua, from 0 here): after the ten shared ones.
PAIRS_AT = 10
"""A move this young is left to the worker that is finishing it (it would be harmless to
finish it twice, only wasted work)."""


def crosses(client: Client, source: QueueKeys, target: QueueKeys) -> bool:
    """Whether a job moving from ``source`` to ``target`` changes Redis Cluster slot."""
    if not isinstance(client, RedisCluster):
        return False
    return bool(client.keyslot(source.wait) != client.keyslot(target.wait))


async def dead_letter(
    client: Client,
    source: QueueKeys,
    target: QueueKeys,
    keys: Sequence[str],
    memo: str,
    args: Sequence[Any],
    max_events: int,
    within: float | None = None,
) -> Any:
    """Dead-letter a job into ``target``, in another slot: step 1 (``dead_letter_out``, whose
    keys are the job's ``keys`` then the memo, its arguments those of ``dead_letter_job``),
    then steps 2 and 3, for at most ``within`` seconds. Returns step 1's reply. A failure (or
    a timeout) after step 1 is logged, not raised: the job has left its queue, and the next
    sweep finishes the move. The bound matters: step 1 may have claimed the slot's next job,
    whose lease nothing renews until this returns."""
    reply = await _scripts.load("dead_letter_out")(client, [*keys, source.moves, memo], args)
    if int(reply[0]) == 0:
        move_id = str(args[10])
        try:
            await asyncio.wait_for(finish(client, source, move_id, max_events), within)
        except Exception as exc:
            log.warning(
                "queue %s: dead letter %s of %s is on its way; a sweep will finish the move (%s)",
                source.queue, move_id, target.queue, str(exc) or type(exc).__name__,
            )  # fmt: skip
    return reply


async def finish(client: Client, source: QueueKeys, move_id: str, max_events: int) -> bool:
    """Steps 2 and 3 of the move ``move_id`` out of ``source``; False when it is finished
    already (no entry)."""
    raw: Any = await client.hget(source.moves, move_id)
    if raw is None:
        return False
    await arrive(client, source.prefix, str(raw), max_events)
    # The job's in-transit mark goes only if it is this move's: the same job id may be on
    # its way again, in a newer move (clear_move.lua).
    job_id = str(json.loads(raw)["id"])
    await _scripts.load("clear_move")(client, [source.moves], [move_id, job_id])
    return True


async def arrive(client: Client, prefix: str, raw: str, max_events: int) -> tuple[str | int, bool]:
    """Step 2: add the move ``raw`` (JSON) to its target; returns the dead letter's id and
    whether this call added it (a replay: the state its new job entered, and True; or -5
    JOB_EXISTS and False when another job holds its id, the dead letter sent back to
    ``pending``)."""
    move = json.loads(raw)
    target = QueueKeys(prefix, move["target"])
    if move.get("kind") == "replay":
        state = await _scripts.load("replay_in")(
            client, [*target.group, target.job(move["id"]), target.moves_in],
            [raw, now_ms(), max_events],
        )  # fmt: skip
        if isinstance(state, int) and state == ErrorCode.JOB_EXISTS:
            # Another job holds the id: the dead letter, processing since step 1, goes back.
            dl_id, note = move["fields"]["replayOf"], "another job holds the replayed job's id"
            await _settle_moved(client, QueueKeys(prefix, move["source"]),
                                [(dl_id, move["id"], "pending", note)], max_events)  # fmt: skip
            return ErrorCode.JOB_EXISTS, False
        return str(state), True
    keys = [target.dl, target.marker, target.events, target.meta, target.job(move["dl"]),
            target.moves_in]  # fmt: skip
    holder, added = await _scripts.load("dead_letter_in")(client, keys, [raw, now_ms(), max_events])
    return str(holder), bool(int(added))


async def sweep(
    client: Client, source: QueueKeys, max_events: int, min_age_ms: int = SWEEP_MIN_AGE_MS
) -> int:
    """Finish the moves out of ``source`` that a crash (or an unreachable target) left
    half-done and are at least ``min_age_ms`` old; returns how many it finished."""
    cutoff, finished, cursor = now_ms() - min_age_ms, 0, 0
    while True:
        reply: Any = await client.hscan(source.moves, cursor, count=SWEEP_BATCH)
        cursor, entries = reply
        for move_id, raw in entries.items():
            if str(move_id).startswith(IN_TRANSIT):
                continue  # the mark of a move, finished with it
            if int(json.loads(raw).get("at", 0)) <= cutoff:
                finished += await finish(client, source, str(move_id), max_events)
        if not cursor:
            break
    if finished:
        log.warning("queue %s: finished %d interrupted move(s)", source.queue, finished)
    return finished


async def replay(
    client: Client,
    source: QueueKeys,
    target: QueueKeys,
    keys: Sequence[str],
    args: Sequence[Any],
    max_events: int,
) -> list[Any]:
    """Replay dead letters of ``source`` into ``target``, in another slot: ``replay_out`` (its
    dead letter ``keys`` and the arguments of ``replay_dead_letters``), then each new job's
    steps 2 and 3. A new job that could not be added yet is reported by the state it will
    enter; the next sweep of ``source`` adds it."""
    results = await _scripts.load("replay_out")(
        client, [source.dl, source.events, source.meta, source.moves, *keys], args
    )
    states: list[Any] = []
    for index, result in enumerate(results):
        if result != "moving":
            states.append(result)
            continue
        new_id = str(args[PAIRS_AT + 1 + index * 6])
        try:
            raw: Any = await client.hget(source.moves, "replay:" + new_id)
            state = await arrive(client, source.prefix, str(raw), max_events)
            await client.hdel(source.moves, "replay:" + new_id)
            states.append(state[0])
        except Exception as exc:
            log.warning(
                "dead letter queue %s: the replay %s into %s is on its way; a sweep will "
                "finish it (%s)", source.queue, new_id, target.queue, exc,
            )  # fmt: skip
            states.append("waiting")
    return states


_NOTES = {
    "removed": ("pending", "the replayed job was removed before it finished"),
    "completed": ("resolved", "the replayed job completed"),
    "failed": ("pending", "the replayed job failed without a dead letter queue"),
}


async def settle(
    client: Client, dlq: QueueKeys, items: Sequence[tuple[str, str, QueueKeys]], max_events: int
) -> int:
    """Settle the ``(dead letter id, replayed job id, its queue's keys)`` items whose job,
    in another slot, will never report back (``settle_moved``); returns how many moved.

    A job completed or failed has arrived, whatever its move's entry says (the worker may
    finish it before the replayer deletes the entry). A missing job counts as removed only
    if its move had arrived already: the entry is read before the job (step 3 follows step
    2), so an entry gone then means a job missing afterwards was removed, not not yet added.
    Nor is a job on its way back to the dead letter queue (failed again, in another move): its
    mark is read after the job, and is deleted only once the job has arrived."""
    async with client.pipeline(transaction=False) as pipe:
        for _dl_id, job_id, _target in items:
            pipe.hexists(dlq.moves, "replay:" + job_id)
        moving = await pipe.execute()
    async with client.pipeline(transaction=False) as pipe:
        for _dl_id, job_id, target in items:
            pipe.hget(target.job(job_id), "replayOf")
            pipe.zscore(target.completed, job_id)
            pipe.zscore(target.failed, job_id)
            pipe.hexists(target.moves, IN_TRANSIT + job_id)
        found = await pipe.execute()
    settled: list[tuple[str, str, str, str]] = []
    for index, (dl_id, job_id, _target) in enumerate(items):
        replay_of, completed, failed, in_transit = found[index * 4 : index * 4 + 4]
        gone = replay_of != dl_id and not moving[index] and not in_transit
        fate = ("completed" if completed is not None else "failed" if failed is not None
                else "removed" if gone else None)  # fmt: skip
        if fate is not None:
            settled.append((dl_id, job_id, *_NOTES[fate]))
    return await _settle_moved(client, dlq, settled, max_events) if settled else 0


async def _settle_moved(
    client: Client, dlq: QueueKeys, items: Sequence[tuple[str, str, str, str]], max_events: int
) -> int:
    """``settle_moved``: each ``(dead letter id, replayed job id, status, note)`` dead letter of
    ``dlq`` still processing for that job enters the status; returns how many did."""
    keys: list[str] = [dlq.dl, dlq.events]
    args: list[Any] = [now_ms(), max_events]
    for dl_id, job_id, status, note in items:
        keys.append(dlq.job(dl_id))
        args += [dl_id, job_id, status, note]
    return int(await _scripts.load("settle_moved")(client, keys, args))


async def resolve(
    client: Client, dlq: QueueKeys, dl_id: str, queue: QueueKeys, job_id: str, max_events: int,
    within: float | None = None,
) -> bool:  # fmt: skip
    """The replayed job ``job_id`` of ``queue`` completed: resolve its dead letter, in another
    slot. The worker knows the job completed, so the dead letter is resolved directly, not by
    reading the job's fate: a job removed on completion would read as removed, and its dead
    letter go back to pending, to run again. A failure is logged, not raised: the job is done,
    and the dead letter is settled by a later sweep (a worker's stall sweep settles a sample
    of processing dead letters). It waits at most ``within`` seconds, for the same reason as
    :func:`dead_letter`."""
    settling = _settle_moved(client, dlq, [(dl_id, job_id, *_NOTES["completed"])], max_events)
    try:
        await asyncio.wait_for(settling, within)
    except Exception as exc:
        log.warning("dead letter %s of %s: resolving it is left to a sweep (%s)", dl_id,
                    dlq.queue, str(exc) or type(exc).__name__)  # fmt: skip
        return False
    return True


async def remove_completed(client: Client, queue: QueueKeys, job_id: str, max_events: int) -> None:
    """Remove the completed replay ``job_id`` once its dead letter, in another slot, is
    resolved (it was kept for that, though removed on completion). A failure is logged: the
    job stays completed, as if kept."""
    try:
        await _scripts.load("remove_job")(
            client, [*queue.group, queue.completed, queue.failed, queue.job(job_id)],
            [job_id, max_events, ""],
        )  # fmt: skip
    except Exception as exc:
        log.warning("queue %s: completed job %s stays (%s)", queue.queue, job_id,
                    str(exc) or type(exc).__name__)  # fmt: skip
