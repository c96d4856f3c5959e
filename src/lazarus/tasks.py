"""Typed tasks: call a function with checked arguments instead of naming a job and a dict.

Example::

    tasks = Tasks("emails")

    @tasks.task(attempts=3, backoff={"type": "exponential", "delay": 1000})
    async def send_welcome(to: str, name: str = "there") -> str:
        ...
        return "sent"

    job = await send_welcome.enqueue("ada@example.com", name="Ada")   # a Job, as queue.add
    worker = tasks.worker(concurrency=10)                            # runs every task

A task is an ordinary job over the same engine: its name is the task's name, its payload
``{"args": [...], "kwargs": {...}}``. ``enqueue`` binds the arguments to the function's
signature and checks those annotated with plain classes (``str``, ``int``, ``float``,
``bool``, ``list``, ``dict``, ...) before anything is written, so a bad call raises
``TypeError`` at the caller, not in a worker later. Type checkers see the function's
parameters on ``enqueue`` too.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, get_type_hints, overload

from ._connection import Client
from .errors import UnrecoverableError
from .job import Job
from .queue import Queue
from .worker import Worker

P = ParamSpec("P")
R = TypeVar("R")

_current_job: contextvars.ContextVar[Job] = contextvars.ContextVar("lazarus_current_job")


def current_job() -> Job:
    """The job the running task was called for (for ``update_progress``, ``log``, ids);
    raises ``LookupError`` outside a task."""
    return _current_job.get()


class Task(Generic[P, R]):
    """A function registered with :meth:`Tasks.task`; call :meth:`enqueue` to run it in a
    worker, or call it directly to run it here."""

    def __init__(
        self, tasks: Tasks, fn: Callable[P, R], name: str, options: Mapping[str, Any]
    ) -> None:
        self.tasks, self.fn, self.name, self.options = tasks, fn, name, dict(options)
        self.signature = inspect.signature(fn)
        hints = get_type_hints(fn)
        # Only plain classes are checked at run time; generics and unions are for type checkers.
        self._checked = {k: v for k, v in hints.items() if k != "return" and isinstance(v, type)}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def payload(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The job payload for this call, after checking it against the signature."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"task {self.name}: {exc}") from None
        for param, value in bound.arguments.items():
            expected = self._checked.get(param)
            if expected is not None and not _instance(value, expected):
                raise TypeError(
                    f"task {self.name}: argument {param!r} must be {expected.__name__}, "
                    f"not {type(value).__name__}"
                )
        return {"args": list(args), "kwargs": dict(kwargs)}

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Add a job that runs this task with these arguments, with the task's options."""
        return await self.enqueue_with({}, *args, **kwargs)

    async def enqueue_with(self, options: Mapping[str, Any], *args: Any, **kwargs: Any) -> Job:
        """As :meth:`enqueue`, with job options (``job_id``, ``delay``, ``priority``, ...)
        over the task's own."""
        payload = self.payload(*args, **kwargs)
        return await self.tasks.queue.add(self.name, payload, **{**self.options, **options})


def _instance(value: Any, expected: type) -> bool:
    if expected is float:  # an int is a fine float, as type checkers agree
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


class Tasks:
    """The tasks of one queue: register them with :meth:`task`, run them with
    :meth:`worker` (or pass :meth:`process` to a :class:`~lazarus.Worker` yourself)."""

    def __init__(
        self, queue: str | Queue, *, connection: str | Client | None = None,
        prefix: str = "lazarus",
    ) -> None:  # fmt: skip
        self.queue = queue if isinstance(queue, Queue) else Queue(
            queue, connection=connection, prefix=prefix
        )  # fmt: skip
        self.registry: dict[str, Task[Any, Any]] = {}

    @overload
    def task(self, fn: Callable[P, R]) -> Task[P, R]: ...

    @overload
    def task(
        self, *, name: str | None = None, **options: Any
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self, fn: Callable[..., Any] | None = None, *, name: str | None = None, **options: Any
    ) -> Any:
        """Register ``fn`` (used as ``@tasks.task`` or ``@tasks.task(name=..., **options)``):
        ``options`` are :meth:`Queue.add` options for every job of the task."""

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            task_name = name or f"{f.__module__}.{f.__qualname__}"
            if task_name in self.registry:
                raise ValueError(f"a task named {task_name!r} is registered already")
            registered = Task(self, f, task_name, options)
            self.registry[task_name] = registered
            return registered

        return register if fn is None else register(fn)

    async def process(self, job: Job) -> Any:
        """The processor that runs every registered task: the one the job names, with its
        arguments. A job naming no registered task fails for good (UnrecoverableError)."""
        task = self.registry.get(job.name)
        if task is None:
            raise UnrecoverableError(f"no task named {job.name!r} is registered")
        payload = job.data if isinstance(job.data, dict) else {}
        args, kwargs = payload.get("args", []), payload.get("kwargs", {})
        token = _current_job.set(job)
        try:
            if inspect.iscoroutinefunction(task.fn):
                return await task.fn(*args, **kwargs)
            call = contextvars.copy_context().run
            result = await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(call, task.fn, *args, **kwargs)
            )
            return await result if isinstance(result, Awaitable) else result
        finally:
            _current_job.reset(token)

    def worker(self, **options: Any) -> Worker:
        """A :class:`~lazarus.Worker` of the queue that runs every registered task
        (``options`` as for ``Worker``; the queue's connection by default)."""
        options.setdefault("connection", self.queue.client)
        options.setdefault("prefix", self.queue.prefix)
        return Worker(self.queue.name, self.process, **options)
