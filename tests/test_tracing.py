"""OpenTelemetry spans: add -> process -> retry -> dead letter -> replay, in one trace."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lazarus import Job, Queue, Worker, _tracing

from .test_worker import on_count

MakeWorker = Callable[..., Worker]


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """A tracer provider of this test's own that keeps every span in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    monkeypatch.setattr(_tracing, "_tracer", lambda: provider.get_tracer("lazarus"))
    yield exporter
    provider.shutdown()


def test_without_a_tracer_provider_no_span_is_made() -> None:
    assert _tracing.active() is False


async def test_a_job_retried_dead_lettered_and_replayed_stays_in_one_trace(
    spans: InMemorySpanExporter, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    calls: list[int] = []

    async def flaky(job: Job) -> str:
        calls.append(1)
        if len(calls) <= 2:
            raise ConnectionError(f"down {len(calls)}")
        return "ok"

    job = await queue.add("charge", {"n": 1}, attempts=2)
    worker = make_worker(flaky, dead_letter_queue="jobs-dlq")
    ids: list[str] = []
    worker.on("deadLettered", lambda j, dl_id: ids.append(dl_id))
    await asyncio.wait_for(on_count(worker, "deadLettered", 1).wait(), 10)
    new_id = await dlq.replay_dead_letter(ids[0])
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    finished = spans.get_finished_spans()
    [add] = [s for s in finished if s.name == "lazarus add jobs"]
    process = [s for s in finished if s.name == "lazarus process jobs"]
    assert [s.attributes["lazarus.outcome"] for s in process] == [
        "retrying", "dead_lettered", "completed"
    ]  # fmt: skip
    assert {s.context.trace_id for s in process} == {add.context.trace_id}
    assert all(s.parent is not None and s.parent.span_id == add.context.span_id
               for s in process)  # fmt: skip
    assert process[0].attributes["messaging.message.id"] == job.id
    assert process[1].attributes["lazarus.dead_letter.id"] == ids[0]
    assert process[1].status.status_code == trace.StatusCode.ERROR
    assert process[2].attributes["messaging.message.id"] == new_id
    assert process[2].attributes["lazarus.job.replay_count"] == 1


async def test_a_processor_span_is_a_child_of_the_attempt(
    spans: InMemorySpanExporter, queue: Queue, make_worker: MakeWorker
) -> None:
    async def work(job: Job) -> None:
        with trace.get_tracer("app").start_as_current_span("inner"):
            return None

    await queue.add("n")
    worker = make_worker(work)
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    finished = {s.name: s for s in spans.get_finished_spans()}
    inner, attempt = finished["inner"], finished["lazarus process jobs"]
    assert inner.parent is not None and inner.parent.span_id == attempt.context.span_id


@pytest.mark.parametrize("how", ["set_tracer_provider", "environment"])
def test_a_tracer_provider_the_api_sets_turns_spans_on(how: str) -> None:
    """Without a provider, ``active`` reads the API's global instead of asking its getter;
    a provider set after lazarus was imported, or named by the environment, still counts."""
    script = textwrap.dedent(
        """
        import sys
        from lazarus import _tracing
        seen = [_tracing.active()]
        if sys.argv[1] == "set_tracer_provider":
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            trace.set_tracer_provider(TracerProvider())
        seen.append(_tracing.active())
        print(*seen)
        """
    )
    env = dict(os.environ)
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    if how == "environment":
        env["OTEL_PYTHON_TRACER_PROVIDER"] = "sdk_tracer_provider"
    run = subprocess.run(
        [sys.executable, "-c", script, how], env=env, capture_output=True, text=True, check=True
    )
    before = "True" if how == "environment" else "False"
    assert run.stdout.split() == [before, "True"]
