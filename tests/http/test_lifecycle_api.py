"""The lifecycle routes: status, flag, reopen, archive, replay with changes, settle; the
timeline and status in every dead letter; the status filter on lists and counts."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lazarus import Queue

from .conftest import DLQ, MakeWorker, dead_letter, job

API = "/api/dead-letters"


async def test_flag_archive_reopen_and_the_timeline(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient, queue: Queue,
    make_worker: MakeWorker,
) -> None:  # fmt: skip
    [dl_id] = await dead_letter(make_worker, queue, [job("email.send", "a")])
    params = {"dlq": DLQ}

    refused = await anonymous.post(f"{API}/{dl_id}/flag", params=params)
    flagged = await client.post(f"{API}/{dl_id}/flag", params=params,
                                json={"operator": "ada", "note": "odd"})  # fmt: skip
    archived = await client.post(f"{API}/{dl_id}/archive", params=params,
                                 json={"note": "refunded"})  # fmt: skip
    again = await client.post(f"{API}/{dl_id}/archive", params=params)

    assert refused.status_code == 401
    assert flagged.status_code == 200, flagged.text
    assert flagged.json()["status"] == "manual"
    assert archived.json()["status"] == "archived"
    assert again.status_code == 409 and again.json()["error"]["code"] == "job_state_conflict"
    timeline = archived.json()["_dlqMeta"]["timeline"]
    # The credential names who acted (the token is named "token"), not the body's "operator"
    assert [(c["to"], c["actor"], c["note"]) for c in timeline] == [
        ("manual", "operator:token", "odd"), ("archived", "operator:token", "refunded"),
    ]  # fmt: skip
    live = await client.get("/api/dlq/count", params=params)
    kept = await client.get("/api/dlq/count", params={**params, "status": "archived"})
    assert (live.json()["count"], kept.json()["count"]) == (0, 1)

    reopened = await client.post(f"{API}/{dl_id}/reopen", params=params)
    assert reopened.json()["status"] == "pending"


async def test_set_status_with_expect(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    [dl_id] = await dead_letter(make_worker, queue, [job("email.send", "a")])
    url, params = f"{API}/{dl_id}/status", {"dlq": DLQ}

    conflict = await client.post(url, params=params, json={"status": "failed",
                                                           "expect": ["manual"]})  # fmt: skip
    bad = await client.post(url, params=params, json={"status": "lost"})
    done = await client.post(url, params=params, json={"status": "failed", "expect": ["pending"]})

    assert conflict.status_code == 409
    assert bad.status_code == 422
    assert done.status_code == 200 and done.json()["status"] == "failed"


async def test_replay_with_a_changed_payload_into_another_queue(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker, redis_url: str,
    prefix: str,
) -> None:  # fmt: skip
    [dl_id] = await dead_letter(make_worker, queue, [job("email.send", "a")])

    response = await client.post(
        f"{API}/{dl_id}/replay",
        params={"dlq": DLQ},
        json={"data": None, "queue": "review", "note": "try null"},
    )
    twice = await client.post(f"{API}/{dl_id}/replay", params={"dlq": DLQ})

    assert response.status_code == 200, response.text
    assert response.json()["queue"] == "review"
    assert twice.status_code == 409
    async with Queue("review", connection=redis_url, prefix=prefix) as review:
        replayed = await review.get_job(response.json()["id"])
    assert replayed is not None and replayed.data is None
    shown = await client.get(f"/api/dlq/{dl_id}", params={"dlq": DLQ})
    meta = shown.json()["_dlqMeta"]
    assert (shown.json()["status"], meta["replayQueue"]) == ("processing", "review")
    assert meta["timeline"][-1]["replacedData"].startswith('{"label":"a"')


@pytest.mark.parametrize(
    ("body", "field"), [({"attempts": True}, "attempts"), ({"priority": False}, "priority")]
)
async def test_replay_refuses_true_or_false_for_a_number_and_replays_nothing(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker, body: Any, field: str
) -> None:
    # Given a dead letter
    [dl_id] = await dead_letter(make_worker, queue, [job("email.send", "a")])

    # When it is replayed with a bool where a number belongs
    response = await client.post(f"{API}/{dl_id}/replay", params={"dlq": DLQ}, json=body)

    # Then it is refused naming the field; the dead letter is still pending, no job was added
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    shown = await client.get(f"/api/dlq/{dl_id}", params={"dlq": DLQ})
    assert shown.json()["status"] == "pending"
    assert await queue.get_waiting_count() == 0


async def test_settle(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dl_id] = await dead_letter(make_worker, queue, [job("email.send", "a")])
    await dlq.replay_dead_letter(dl_id)
    assert len(await queue.clean(0, state="waiting")) == 1  # the replayed job is gone

    response = await client.post(f"{API}/settle", params={"dlq": DLQ})

    assert response.json() == {"settled": 1}
