"""How a worker runs: it registers its queues (and its dead letter queue), publishes its rate
limit, starts what runs beside its claim loop (lease keepers, its presence in the registry, the
dead letter queue's pruner), runs the loop, waits for its jobs in flight, and stops the rest.
:meth:`Worker.run <lazarus.Worker.run>` does it all; :mod:`._shutdown` is how it stops.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ._claiming import main_loop
from ._keys import QueueKeys
from ._lanes import keepers
from ._lanes import main_loop as lanes_main_loop
from ._limiter import publish as publish_limit
from ._slot import HAND_BACK_TIMEOUT
from ._supervision import register
from .dead_letter.pruner import Pruner
from .errors import RedisUnavailableError
from .workers import Presence

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger("lazarus.worker")


def autostart(worker: Worker) -> asyncio.Task[int | None] | None:
    """The task of :meth:`Worker.run <lazarus.Worker.run>`, started in the running event loop
    (``None`` outside of one)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.create_task(worker.run())


async def run(worker: Worker) -> int | None:
    """:meth:`Worker.run <lazarus.Worker.run>`."""
    current = asyncio.current_task()
    if (
        worker._run_task is not None
        and worker._run_task is not current
        and not worker._run_task.done()
    ):
        await asyncio.shield(worker._run_task)
        return worker.jobs_started
    worker._run_task = current
    if not await _start_up(worker):
        return worker.jobs_started
    await publish_limit(
        worker._client, [lane.keys for lane in worker._lanes], worker.limiter,
        incident=worker._start_incident, report=worker._report_error, stopping=worker._stopping,
    )  # fmt: skip
    lease_keepers = keepers(worker)
    lease_tasks = {asyncio.create_task(keeper.run()) for keeper in lease_keepers}
    # Registered while it runs: the dashboard and API list it, and call its queue running.
    presence = Presence(worker._client, worker.keys, worker.name, worker.concurrency,
                        lambda: len(worker._tasks))  # fmt: skip
    presence_task = asyncio.create_task(presence.run())
    pruner = _pruner(worker)
    beside = {*lease_tasks, presence_task}
    if pruner is not None:
        beside.add(asyncio.create_task(pruner.run()))
    try:
        await (main_loop(worker) if len(worker._lanes) == 1 else lanes_main_loop(worker))
        # Leases are renewed until the jobs in flight are done (close() bounds the wait).
        while worker._tasks:
            await asyncio.wait(set(worker._tasks))
        await worker._slots.holds.close(HAND_BACK_TIMEOUT)  # jobs held ahead, going back
    finally:
        for keeper in lease_keepers:
            keeper.stop()
        presence.stop()
        if pruner is not None:
            pruner.stop()
        _, pending = await asyncio.wait(beside, timeout=worker.shutdown_timeout)
        for task in pending:
            task.cancel()
        await presence.leave()
    if not worker._close_called:  # it ended on its own: the burst is over, or max_jobs
        await worker.close()
    return worker.jobs_started


async def _start_up(worker: Worker) -> bool:
    # The dead letter queue is registered too: the dead-letter script writes to it without
    # going through Queue, and list_queues (the CLI, the API, the dashboard) must show it.
    # So is it in the registry of dead letter queues, which DeadLetterView reads.
    entries = {worker.keys.registry: [*worker.queue_names]}
    if worker.dead_letter_queue is not None:
        entries[worker.keys.registry].append(worker.dead_letter_queue.queue_name)
        entries[worker.keys.dead_letter_registry] = [worker.dead_letter_queue.queue_name]
    worker._starting = True
    try:
        return await register(
            worker._client, entries, incident=worker._start_incident,
            report=worker._report_error, stopping=worker._stopping,
        )  # fmt: skip
    except RedisUnavailableError as exc:  # the settings are wrong: no point in retrying
        log.error("worker %s: %s", worker.name, exc)
        worker._report_error(exc, None)
        raise
    finally:
        worker._starting = False


def _pruner(worker: Worker) -> Pruner | None:
    """Prunes the dead letter queue while no other process (a redriver) leads pruning."""
    if worker.dead_letter_queue is None or worker.prune_interval is None:
        return None
    keys = QueueKeys(worker.keys.prefix, worker.dead_letter_queue.queue_name)
    return Pruner(worker._client, keys, worker._ctx.max_events, holder=worker.name,
                  interval=worker.prune_interval, on_error=worker._report_error)  # fmt: skip
