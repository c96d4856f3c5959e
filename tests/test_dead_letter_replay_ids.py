"""Replay with chosen ids: a dead letter can go back to its queue under the id its job had
(what an OJS retry does), and a mismatched list of ids is refused before anything moves."""

from __future__ import annotations

import pytest

from lazarus import Queue
from lazarus.dead_letter import replay

from .test_dead_letters import MakeWorker, dead_letter_all, only_dead_letter


async def test_a_dead_letter_replays_under_the_id_its_job_had(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given job 'order-7' dead-lettered after its one attempt
    await queue.add("charge", {"n": 7}, job_id="order-7")
    await dead_letter_all(make_worker, dlq, 1)
    dead = await only_dead_letter(dlq)
    assert await queue.get_job("order-7") is None

    # When it is replayed with the original id
    ((new_id, state),) = await replay.replay(
        dlq.client, dlq.keys, dlq.max_events, "jobs", [(dead.id, replay.KEEP)],
        new_ids=["order-7"],
    )  # fmt: skip

    # Then 'order-7' waits in its queue again, attempts reset, and the dead letter is gone
    assert (new_id, state) == ("order-7", "waiting")
    job = await queue.get_job("order-7")
    assert job is not None and job.data == {"n": 7} and job.attempts_made == 0
    assert await dlq.get_dead_letter_count() == 0


async def test_new_ids_must_match_the_items(queue: Queue, dlq: Queue) -> None:
    with pytest.raises(ValueError, match="new_ids"):
        await replay.replay(dlq.client, dlq.keys, dlq.max_events, "jobs",
                            [("a", replay.KEEP), ("b", replay.KEEP)], new_ids=["x"])  # fmt: skip
