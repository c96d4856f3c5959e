"""How a worker stops: it claims no more, lets the jobs in flight finish (up to a deadline,
then hands them back), wakes its own blocking claim through Redis rather than cancel it
(cancelling could lose the reply of a claim that already ran), and releases what it holds.
:meth:`Worker.close <lazarus.Worker.close>` does it all; a worker that started its
``max_jobs`` only stops claiming, and :meth:`~lazarus.Worker.run` closes it once its jobs are
done.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ._connection import REDIS_FAILURES
from ._processes import shut_down

if TYPE_CHECKING:
    from .worker import Worker


def _halt(worker: Worker) -> None:
    """Claim no more jobs, and end the claim loop's waits (a backoff, a full worker)."""
    worker._closing = True
    worker._stopping.set()
    worker._slot_freed.set()


def stop_claiming(worker: Worker) -> None:
    """Claim no more jobs, and end the claim loop's waits (a backoff, a full worker); a
    blocking claim in flight is woken through Redis."""
    _halt(worker)
    if worker._blocking:
        worker._woke_itself = True
        task = asyncio.get_running_loop().create_task(wake(worker))
        worker._background.add(task)
        task.add_done_callback(worker._background.discard)


async def close(worker: Worker, timeout: float | None) -> None:
    """:meth:`Worker.close <lazarus.Worker.close>`."""
    if worker._closed:
        return
    worker._close_called = True
    _halt(worker)
    woken = worker._blocking and await wake(worker)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (worker.shutdown_timeout if timeout is None else timeout)
    # The run() task, unless close() is called from inside it.
    run_task = worker._run_task if worker._run_task is not asyncio.current_task() else None
    if run_task is not None:
        if worker._starting or (worker._blocking and not woken):  # no reply or job to lose
            run_task.cancel()
        # run() returns once the jobs in flight are done, renewing their leases meanwhile.
        await asyncio.wait({run_task}, timeout=max(deadline - loop.time(), 0))
    if worker._tasks:  # close() from inside run(), or run() was cancelled
        _, pending = await asyncio.wait(set(worker._tasks), timeout=max(deadline - loop.time(), 0))
        await _cancel(pending)
    if run_task is not None:
        if not run_task.done():
            run_task.cancel()
        await asyncio.gather(run_task, return_exceptions=True)
    if woken or worker._woke_itself:  # the loop may have left before popping it
        with contextlib.suppress(*REDIS_FAILURES):
            await worker._client.delete(worker._wake_key)
    if worker._ctx.executor is not None:
        shut_down(worker._ctx.executor)
    if worker._owns_client:
        await worker._client.aclose()
    worker._closed = True


async def wake(worker: Worker) -> bool:
    """Wake the worker's blocking claim through Redis. False when Redis could not be told."""
    try:
        async with worker._client.pipeline(transaction=True) as pipe:
            pipe.zadd(worker._wake_key, {"close": 0})
            pipe.pexpire(worker._wake_key, int((worker.block_timeout + 60) * 1000))
            await pipe.execute()
    except REDIS_FAILURES:
        return False
    return True


async def _cancel(tasks: set[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
