"""The health of a dead letter queue, from its counters and indexes."""

from __future__ import annotations

import pytest

from lazarus import Queue

from .conftest import MakeDeadLetters


async def test_health_measures_backlog_ingestion_error_types_and_time_in_dlq(
    dlq: Queue, make_dead_letters: MakeDeadLetters
) -> None:
    await make_dead_letters(2, error="timeout")
    ids = await make_dead_letters(1)
    jobs = await dlq.get_dead_letter_jobs()
    oldest, newest = min(j.timestamp for j in jobs), max(j.timestamp for j in jobs)

    health = await dlq.get_dead_letter_health(now=newest + 600_000)
    recent = await dlq.get_dead_letter_health(now=newest)

    assert health.backlog == 3 and health.by_status == {"pending": 3}
    assert health.error_types == {"TimeoutError": 2, "UnrecoverableError": 1}
    assert recent.ingestion_per_minute == pytest.approx(3 / 5)
    assert health.ingestion_per_minute == 0
    assert health.time_in_dlq_p95 == pytest.approx((newest + 600_000 - oldest) / 1000, abs=0.002)
    assert 600 <= (health.time_in_dlq_mean or 0) <= (newest + 600_000 - oldest) / 1000
    assert health.resolution_rate is None and health.replay_success_rate is None

    await dlq.set_dead_letter_status(ids[0], "resolved", actor="redriver")
    await dlq.set_dead_letter_status(ids[1], "failed", actor="redriver")
    after = await dlq.get_dead_letter_health()

    assert after.resolution_rate == 0.5
    assert after.backlog == 1


async def test_time_in_dlq_from_sampled_ranks_stays_close_on_a_larger_backlog(
    dlq: Queue, make_dead_letters: MakeDeadLetters
) -> None:
    await make_dead_letters(150)
    jobs = await dlq.get_dead_letter_jobs()
    now = max(j.timestamp for j in jobs) + 1_000
    ages = sorted((now - j.timestamp) / 1000 for j in jobs)

    health = await dlq.get_dead_letter_health(now=now)

    assert health.time_in_dlq_mean == pytest.approx(sum(ages) / len(ages), abs=0.05)
    assert health.time_in_dlq_p95 == pytest.approx(ages[int(0.95 * len(ages))], abs=0.05)


async def test_health_of_an_empty_queue_has_nothing_to_measure(dlq: Queue) -> None:
    health = await dlq.get_dead_letter_health()

    assert health.backlog == 0 and health.by_status == {} and health.error_types == {}
    assert health.time_in_dlq_mean is None and health.time_in_dlq_p95 is None
    assert health.to_json()["backlog"] == 0
