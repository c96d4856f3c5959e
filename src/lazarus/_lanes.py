"""One worker, several queues: ``Worker(["critical", "default"], processor)``.

Each queue is a *lane*: its keys, execution context, slot runner, held leases and claim call
id. The lanes share the worker's slots (``concurrency`` bounds all of them together), its
processor, its executor and its dead letter queue, and the lease renewal and stall sweep
(one :class:`~lazarus._lease.LeaseKeeper` per lane, run side by side by the worker).

Each round the worker claims from its lanes in order until its free slots are used: by
default in the order given (strict priority: a queue is only drained into free slots once
the queues before it had nothing), or with ``weights`` in a weighted random order per round
(a lane of weight 3 is first three times as often as one of weight 1). When no lane had
enough work, one blocking wait on every lane's marker wakes the worker for any of them.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

from . import _scripts
from ._burst import next_step, room
from ._checks import at_least
from ._claiming import begin_before_blocking, start
from ._connection import now_ms
from ._execution import ClaimedJob, ExecutionContext, parse_claimed
from ._keys import QueueKeys, new_id, validate_queue_name
from ._lease import LeaseKeeper
from ._slot import SlotRunner
from ._supervision import pause

if TYPE_CHECKING:
    from .worker import Worker


@dataclasses.dataclass
class Lane:
    """One queue of a worker."""

    keys: QueueKeys
    ctx: ExecutionContext
    slots: SlotRunner
    held: dict[str, str]  # job id -> lock token of this queue's running jobs
    weight: int = 1
    claim_id: str = dataclasses.field(default_factory=new_id)

    @property
    def claim_keys(self) -> tuple[str, ...]:
        return (*self.keys.group, self.keys.reply(self.ctx.token_base, "claim"))


def queue_names(value: Any) -> list[str]:
    """The worker's queue names from a name, a :class:`~lazarus.Queue`, or a sequence of
    them (at least one, no repeats)."""
    items = [value] if isinstance(value, str) or hasattr(value, "keys") else value
    if not isinstance(items, Sequence) or not items:
        raise TypeError("queue_name must be a queue name, a Queue, or a non-empty list of them")
    names = [validate_queue_name(getattr(item, "name", item), "queue_name") for item in items]
    if len(set(names)) != len(names):
        raise ValueError(f"queue_name lists a queue twice: {names}")
    return names


def check_weights(weights: Mapping[str, int] | None, names: list[str]) -> dict[str, int]:
    """Each queue's weight (1 by default); ``weights`` must name only the worker's queues."""
    if weights is None:
        return {}
    if not isinstance(weights, Mapping):
        raise TypeError(f"weights must be a dict, not {type(weights).__name__}")
    for name, weight in weights.items():
        if name not in names:
            raise ValueError(f"weights names {name!r}, which is not one of the worker's queues")
        at_least(weight, f"weights[{name!r}]")
    return dict(weights)


def make_lanes(worker: Worker, names: list[str], weights: dict[str, int]) -> list[Lane]:
    """The lanes of ``worker``; the first uses the worker's own context, slots and leases."""
    dlq = worker.dead_letter_queue
    if dlq is not None and dlq.queue_name in names:
        raise ValueError("dead_letter_queue must not be one of the worker's own queues")
    # A slot that finishes a job claims its queue's next in the same call; with several
    # queues that would keep a slot on a lower queue while a higher one fills up. So only
    # the first queue (by strict priority) does; the others, and all of them when weighted,
    # go back to the claim loop, one more round trip per job.
    first_chains = not weights
    first = worker._slots if first_chains or len(names) == 1 else \
        dataclasses.replace(worker._slots, fetch_next=False)  # fmt: skip
    lanes = [Lane(worker.keys, worker._ctx, first, worker._held, weights.get(names[0], 1))]
    for name in names[1:]:
        keys = QueueKeys(worker.keys.prefix, name)
        held: dict[str, str] = {}
        ctx = dataclasses.replace(worker._ctx, keys=keys)
        slots = dataclasses.replace(worker._slots, ctx=ctx, held=held, fetch_next=False,
                                    running={}, stops={})  # fmt: skip
        lanes.append(Lane(keys, ctx, slots, held, weights.get(name, 1)))
    client = worker._ctx.client
    spread = len({client.keyslot(lane.keys.marker) for lane in lanes}) > 1 \
        if isinstance(client, RedisCluster) else False  # fmt: skip
    if spread:
        raise ValueError("on Redis Cluster the queues of one worker must share a hash tag, "
                         "for example '{jobs}-critical' and '{jobs}-default'")  # fmt: skip
    return lanes


def keepers(worker: Worker) -> list[LeaseKeeper]:
    """A lease keeper per lane: renewals of its running jobs and sweeps of its queue."""
    return [_keeper(worker, lane) for lane in worker._lanes]


def _keeper(worker: Worker, lane: Lane) -> LeaseKeeper:
    return LeaseKeeper(
        lane.ctx, lambda: dict(lane.held),
        stalled_interval_ms=worker.stalled_interval, max_stalled_count=worker.max_stalled_count,
        on_lost=worker._mark_lost, on_error=worker._report_error, on_cancel=lane.slots.stop,
    )  # fmt: skip


def claim_order(lanes: list[Lane], weighted: bool) -> list[Lane]:
    """The lanes in the order to claim from this round: as given, or a weighted random
    order (each key ``u ** (1 / weight)``, the largest first)."""
    if not weighted:
        return lanes
    return sorted(lanes, key=lambda lane: random.random() ** (1 / lane.weight), reverse=True)


async def claim(worker: Worker, lane: Lane, count: int) -> tuple[list[ClaimedJob], int]:
    """Claim up to ``count`` jobs of one lane; returns them and its next due time."""
    args = [now_ms(), worker.name, worker.lock_duration, count, lane.ctx.max_events,
            lane.claim_id]  # fmt: skip
    reply = await _scripts.load("claim_jobs")(worker._client, lane.claim_keys, args)
    lane.claim_id = new_id()  # a reply is in: the next claim is a new call
    jobs = [parse_claimed(item, lane.keys.queue) for item in reply[1:]]
    return [j for j in jobs if j is not None], int(reply[0])


async def wait_for_work(worker: Worker, next_due: int) -> None:
    """Block until any lane's marker is set, the next delayed job is due, or close()."""
    from ._claiming import BLOCK_READ_MARGIN, _block_seconds

    timeout = worker.block_timeout
    if next_due >= 0:
        timeout = min(timeout, max((next_due - now_ms()) / 1000, 0.001))
    keys = [lane.keys.marker for lane in worker._lanes]
    worker._blocking = True  # from here on, close() wakes this call instead of cancelling
    try:
        if worker._closing:
            return
        (reply,) = await _scripts.execute(
            worker._client, [("BZPOPMIN", *keys, worker._wake_key, _block_seconds(timeout))],
            timeout=timeout + BLOCK_READ_MARGIN, repeatable=False,
        )  # fmt: skip
    finally:
        worker._blocking = False
    if isinstance(reply, Exception):
        raise reply


async def claim_round(worker: Worker, free: int, weighted: bool) -> tuple[int, int]:
    """Claim up to ``free`` jobs from the lanes in this round's order, and start them; how
    many it claimed, and the next due time of any lane."""
    claimed, next_due = 0, -1
    for lane in claim_order(worker._lanes, weighted):
        if claimed >= free:
            break
        jobs, due = await claim(worker, lane, free - claimed)
        for job in jobs:  # started even when closing: they are claimed
            start(worker, job, lane.slots)
        claimed += len(jobs)
        if due >= 0 and (next_due < 0 or due < next_due):
            next_due = due
    return claimed, next_due


async def main_loop(worker: Worker) -> None:
    """The claim loop of a worker with several queues (see the module docstring)."""
    weighted = any(lane.weight != 1 for lane in worker._lanes)
    idle, next_due = False, -1
    while not worker._closing:
        free = room(worker)
        if free <= 0:
            worker._slot_freed.clear()
            await worker._slot_freed.wait()
            continue
        try:
            if idle and worker.burst:
                step = await next_step(worker)
                if step is None:
                    return  # the burst is over
                if not step:  # a slot ended: claim at once, for as many as are free now
                    idle = False
                    continue
            if idle:
                await wait_for_work(worker, next_due)
            claimed, next_due = await claim_round(worker, free, weighted)
            idle = claimed < free  # every lane had less than asked: all drained for now
            if claimed and idle:
                await begin_before_blocking()
        except Exception as exc:  # whatever it is, the loop goes on (after a backoff)
            idle = False
            worker._report_error(exc, worker._claim_incident)
            await pause(worker._stopping, worker._claim_incident.backoff())
            continue
        if worker._claim_incident.failures:
            worker._claim_incident.succeeded()
