"""The worker process of the fault-injection scenarios, and the fork server that starts them.

``python worker.py serve`` imports lazarus once, then reads one JSON worker configuration per
line on stdin, forks a child that runs a :class:`lazarus.Worker` with it, and answers the
child's pid on stdout. Forking an imported interpreter takes milliseconds where a fresh one
takes half a second of CPU, which is what lets a scenario SIGKILL a worker every 250 ms on two
cores. Each child is an ordinary process: it can be SIGKILLed, SIGSTOPped and SIGTERMed, and
it exits the way a program does (interpreter shutdown included). ``python worker.py run
'<json>'`` runs one worker without the server.

Every execution is counted outside Redis: the child appends one line per event to
``<log_dir>/runs-<pid>.log`` with a single ``write(2)`` on an ``O_APPEND`` descriptor, so a line
is whole even when the process is killed right after::

    R <job id> <attempt> <unix time>    the processor started (attempt = claims so far)
    C <job id>                          the worker recorded the job completed
    D <job id> <dead letter id>         the worker recorded the job dead-lettered
    Y <job id>                          the worker recorded a failed attempt, to be retried
    L <job id>                          the worker lost the job's lock; its outcome was dropped
    E <error type>                      the worker reported an error
    X <error type> <message>            Worker.run() raised (or returned unasked, unless the
                                        worker runs with burst or max_jobs): the worker died
                                        by itself

The processor does what the job's data says: ``ms`` milliseconds of work, then a failure
(``error``, default ``RuntimeError``) while ``attempts_made < fail``; ``hang`` never returns.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from lazarus import DeadLetterError, Job, Worker

ERRORS: dict[str, type[Exception]] = {
    "RuntimeError": RuntimeError,
    "ValueError": ValueError,
    "TimeoutError": TimeoutError,
    "DeadLetterError": DeadLetterError,
}


class RunLog:
    """Appends event lines to this process's own file."""

    def __init__(self, log_dir: str) -> None:
        path = os.path.join(log_dir, f"runs-{os.getpid()}.log")
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, *fields: object) -> None:
        os.write(self._fd, (" ".join(str(f) for f in fields) + "\n").encode())


def _fail_if_told(job: Job) -> Any:
    data = job.data
    if job.attempts_made < int(data.get("fail", 0)):
        raise ERRORS[data.get("error", "RuntimeError")](f"job {data.get('i')} failed as told")
    return data.get("i")


def make_processor(log: RunLog, sync: bool) -> Any:
    """The processor: async, or a plain function that runs in the worker's thread pool."""

    async def process(job: Job) -> Any:
        log.write("R", job.id, job.attempts_started, f"{time.time():.3f}")
        if job.data.get("hang"):
            await asyncio.Event().wait()
        if job.data.get("ms"):
            await asyncio.sleep(job.data["ms"] / 1000)
        return _fail_if_told(job)

    def process_sync(job: Job) -> Any:
        log.write("R", job.id, job.attempts_started, f"{time.time():.3f}")
        if job.data.get("hang"):
            threading.Event().wait()
        if job.data.get("ms"):
            time.sleep(job.data["ms"] / 1000)
        return _fail_if_told(job)

    return process_sync if sync else process


async def work(config: dict[str, Any]) -> int:
    """Run one worker until SIGTERM; 1 when ``Worker.run()`` raised."""
    log = RunLog(config["log_dir"])
    worker = Worker(
        config["queue"],
        make_processor(log, config.get("sync", False)),
        connection=config["url"],
        prefix=config["prefix"],
        dead_letter_queue=config.get("dlq"),
        autorun=False,
        **config.get("options", {}),
    )
    worker.on("completed", lambda job, _: log.write("C", job.id))
    worker.on("deadLettered", lambda job, dl_id: log.write("D", job.id, dl_id))
    worker.on("retrying", lambda job, _: log.write("Y", job.id))
    worker.on("lost", lambda job_id: log.write("L", job_id))
    worker.on("error", lambda exc: log.write("E", type(exc).__name__))
    # run() in a task of its own, as autorun would: close() waits for that task, so it must
    # not be the one that waits for close().
    running = asyncio.create_task(worker.run())
    closing: list[asyncio.Task[None]] = []
    asyncio.get_running_loop().add_signal_handler(
        signal.SIGTERM, lambda: closing.append(asyncio.create_task(worker.close()))
    )
    try:
        await running
    except Exception as exc:
        log.write("X", type(exc).__name__, str(exc).replace("\n", " ")[:200])
        return 1
    options = config.get("options", {})
    ends_itself = options.get("burst") or options.get("max_jobs")  # run() returns unasked
    if not closing and not ends_itself:
        log.write("X", "run() returned without close()")
        return 1
    for task in closing:
        await task
    return 0


def run(config: dict[str, Any]) -> int:
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    return asyncio.run(work(config))


def _reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _die_with_parent() -> None:
    """Have Linux SIGKILL this child when the fork server goes, which it does when the
    scenario's process goes (its stdin closes): no worker outlives an interrupted run."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: stop() still ends every worker
        pass


def serve() -> dict[str, Any] | None:
    """Fork a worker per configuration line; in a child, return its configuration."""
    signal.signal(signal.SIGCHLD, _reap)
    while True:
        line = sys.stdin.readline()
        if not line.strip():
            return None  # the scenario closed the pipe (or asked to stop)
        config = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _die_with_parent()
            err = os.open(
                os.path.join(config["log_dir"], f"worker-{os.getpid()}.err"),
                os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644,
            )  # fmt: skip
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(err, 1)
            os.dup2(err, 2)
            return dict(config)
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    child = serve() if sys.argv[1] == "serve" else json.loads(sys.argv[2])
    if child is not None:
        sys.exit(run(child))
