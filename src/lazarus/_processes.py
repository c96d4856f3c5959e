"""Where a worker runs a plain-function processor: daemon threads, or with ``processes=N``
a pool of N processes for CPU-bound work (the GIL lets only one thread compute at a time).

In a process the processor gets a copy of the job: its payload, options and counters, but no
connection, so ``job.update_progress`` and ``job.log`` are not available there. The processor
must be importable by name (a module-level function), since each process is started fresh
(``spawn``): a forked copy of a process running an event loop and Redis connections is not
safe to use.
"""

from __future__ import annotations

import inspect
import multiprocessing
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

from ._checks import at_least
from ._threads import DaemonThreadPool


def check_processes(processes: object, processor: Callable[..., Any]) -> int | None:
    """``processes`` validated against ``processor``: ``None``, or an int >= 1 for a plain
    function."""
    if processes is None:
        return None
    count = at_least(processes, "processes")
    if inspect.iscoroutinefunction(processor):
        raise TypeError("processes needs a plain-function processor, not an async one")
    return count


def executor_for(
    processor: Callable[..., Any], queue_name: str, processes: int | None
) -> Executor | None:
    """None for an async processor (it runs in the event loop), else the pool that runs it."""
    if inspect.iscoroutinefunction(processor):
        return None
    if processes is not None:
        return ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
    return DaemonThreadPool(thread_name_prefix=f"lazarus-{queue_name}")


def shut_down(executor: Executor) -> None:
    """Stop ``executor`` without waiting: threads are abandoned (they cannot be stopped), a
    process pool's queued calls are cancelled and its processes exit after their current one."""
    if isinstance(executor, ProcessPoolExecutor):
        executor.shutdown(wait=False, cancel_futures=True)
    else:
        executor.shutdown(wait=False)
