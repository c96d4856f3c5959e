"""Payload schemas: check a job's data when it is added, and parse it for the processor.

A schema is a pydantic model class (pydantic is optional: ``pip install lazarus-queue[schema]``)
or any callable that takes the payload and returns it parsed, raising ``ValueError`` or
``TypeError`` when it does not fit::

    class Email(pydantic.BaseModel):
        to: str
        subject: str = ""

    queue = Queue("emails", schema=Email)
    await queue.add("send", {"to": "ada@example.com"})  # checked before anything is written
    await queue.add("send", {"subject": "hi"})          # ValueError: data.to: Field required

    async def send(job: Job, email: Email) -> None:     # given the parsed model
        ...

    worker = Worker("emails", send, schema=Email)

With a pydantic model, what is stored is the model's JSON form (``model_dump(mode="json")``),
so ``add`` also takes model instances; with a callable, the payload as given.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from .errors import UnrecoverableError
from .job import Job

Schema = Callable[[Any], Any]


class PayloadSchema:
    """A schema with the two things lazarus does with it: check, and parse."""

    def __init__(self, schema: Schema) -> None:
        if not callable(schema):
            raise TypeError(f"schema must be a pydantic model or a callable, not {schema!r}")
        self.schema = schema
        self._model = _is_model(schema)
        self.label = getattr(schema, "__name__", type(schema).__name__)

    def parse(self, data: Any, field: str = "data") -> Any:
        """``data`` parsed by the schema; a mismatch raises ``ValueError`` naming the field
        (for a pydantic model, the first failing one: ``data.user.email: ...``)."""
        if self._model:
            if isinstance(data, self.schema):  # type: ignore[arg-type]
                return data
            try:
                return self.schema.model_validate(data)  # type: ignore[attr-defined]
            except ValueError as exc:  # pydantic's ValidationError is one
                raise ValueError(_first_error(exc, field, self.label)) from exc
        try:
            return self.schema(data)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"{field} does not match {self.label}: {exc}") from exc

    def stored(self, data: Any, field: str = "data") -> Any:
        """What ``add`` stores for ``data``: checked, and in JSON form for a pydantic model."""
        parsed = self.parse(data, field)
        if self._model:
            return parsed.model_dump(mode="json")
        return data


def _is_model(schema: object) -> bool:
    return inspect.isclass(schema) and callable(getattr(schema, "model_validate", None))


def _first_error(exc: ValueError, field: str, label: str) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        details = errors()
        if details:
            first = details[0]
            path = ".".join(str(part) for part in (field, *first.get("loc", ())))
            more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
            return f"{path}: {first.get('msg', 'invalid')}{more}"
    return f"{field} does not match {label}: {exc}"


def with_payload(processor: Callable[..., Any], schema: PayloadSchema) -> Callable[[Job], Any]:
    """A processor of ``job`` that calls ``processor(job, payload)`` with the parsed payload.

    A payload that does not parse fails the job with :class:`UnrecoverableError`: no retry
    can mend it. The wrapper is async exactly when ``processor`` is, so a plain function
    still runs in a thread of its own.
    """

    def parsed(job: Job) -> Any:
        try:
            return schema.parse(job.original_data)
        except (ValueError, TypeError) as exc:
            raise UnrecoverableError(str(exc)) from exc

    if inspect.iscoroutinefunction(processor):

        @functools.wraps(processor)
        async def run_async(job: Job) -> Any:
            return await processor(job, parsed(job))

        return run_async

    @functools.wraps(processor)
    def run(job: Job) -> Any:
        return processor(job, parsed(job))

    return run


__all__ = ["PayloadSchema", "Schema", "with_payload"]
