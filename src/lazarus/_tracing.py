"""OpenTelemetry spans, when ``opentelemetry-api`` is installed and a tracer provider is set.

- ``lazarus add <queue>`` (PRODUCER) around an add; its context (W3C ``traceparent``) is
  written into each job's stored options as ``tp``, so it travels with the job: into its dead
  letter (``originalOpts``) and into the job a replay makes.
- ``lazarus process <queue>`` (CONSUMER) around each attempt, a child of the context the job
  carries, with the job's id, name, attempt, replay count and outcome (``completed``,
  ``retrying``, ``failed``, ``dead_lettered``, ``rate_limited``), the exception of a failed
  attempt and the dead letter's id. An attempt of a replayed job is a child of the original
  add, so the trace links the first failure and the replay.

Without the package, or with no tracer provider configured, each hook costs one check: no span
is made and nothing is written.
"""

from __future__ import annotations

import json
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - the optional dependency is absent
    trace = None  # type: ignore[assignment]

_propagator: Any = TraceContextTextMapPropagator() if trace is not None else None
# Until a provider is set, get_tracer_provider() looks up its environment variable on every
# call (a KeyError raised and caught: a few microseconds of every add). So the API's global
# is read first, and the getter is asked only once a provider is set, or when the getter is
# not the API's own (replaced, as tests do). Asked once here, the getter sets the global
# from the environment variable if that names a provider.
_GETTER = trace.get_tracer_provider if trace is not None else None
if _GETTER is not None:
    _GETTER()


def active() -> bool:
    """Whether spans are made: the API is installed and a real tracer provider is set."""
    if trace is None:
        return False
    if getattr(trace, "_TRACER_PROVIDER", True) is None and trace.get_tracer_provider is _GETTER:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _tracer() -> Any:
    return trace.get_tracer("lazarus")


def start_add(queue_name: str, opts_args: list[list[Any]]) -> Any:
    """Start the span of an add of ``len(opts_args)`` jobs and write its context into each
    job's options JSON (``args[3]`` of each job's add arguments). Returns the span."""
    span = _tracer().start_span(
        f"lazarus add {queue_name}", kind=trace.SpanKind.PRODUCER,
        attributes={"messaging.system": "lazarus", "messaging.destination.name": queue_name,
                    "messaging.batch.message_count": len(opts_args)},
    )  # fmt: skip
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    parent = carrier.get("traceparent")
    if parent:
        for args in opts_args:
            args[3] = args[3][:-1] + ',"tp":' + json.dumps(parent) + "}"
    return span


def end(span: Any) -> None:
    span.end()


def start_process(job: Any) -> tuple[Any, Any]:
    """Start the span of one attempt of ``job``, a child of the context it carries; returns
    the span and the token that makes it current (for :func:`end_process`)."""
    try:
        parent = json.loads(job.opts_json).get("tp")
    except (ValueError, AttributeError):
        parent = None
    ctx = _propagator.extract({"traceparent": parent}) if parent else None
    span = _tracer().start_span(
        f"lazarus process {job.queue_name}", context=ctx, kind=trace.SpanKind.CONSUMER,
        attributes={"messaging.system": "lazarus",
                    "messaging.destination.name": job.queue_name,
                    "messaging.message.id": job.id, "lazarus.job.name": job.name,
                    "lazarus.job.attempt": job.attempts_started,
                    "lazarus.job.replay_count": job.replay_count},
    )  # fmt: skip
    token = otel_context.attach(trace.set_span_in_context(span))
    return span, token


def end_process(started: tuple[Any, Any], outcome: Any, error: BaseException | None) -> None:
    """End an attempt's span with its outcome (``None``: the outcome was not recorded)."""
    span, token = started
    otel_context.detach(token)
    kind = outcome.kind if outcome is not None else "unrecorded"
    span.set_attribute("lazarus.outcome", kind)
    if error is not None:
        span.record_exception(error)
        if kind in ("failed", "dead_lettered"):
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)))
    dead_letter_id = getattr(outcome, "dead_letter_id", None)
    if dead_letter_id:
        span.set_attribute("lazarus.dead_letter.id", dead_letter_id)
    span.end()
