"""Dead letters across every dead letter queue: the merged list by cursor, the names of the
dead letter queues, and the lookup by the original job's id."""

from __future__ import annotations

from typing import Any

import httpx

from lazarus import Queue

from .conftest import DLQ, MakeWorker, dead_letter, job

ALL = "/api/dead-letters"


async def test_the_merged_list_pages_every_dead_letter_queue_by_cursor(
    client: httpx.AsyncClient, seeded: dict[str, str], make_worker: MakeWorker, other: Queue
) -> None:
    # Given four dead letters in jobs-dlq, then one in mail-dlq
    [late] = await dead_letter(make_worker, other, [job("email.send", "e")], dlq="mail-dlq")

    # When every dead letter queue is listed three at a time
    first = (await client.get(ALL, params={"limit": 3})).json()
    second = (
        await client.get(ALL, params={"limit": 3, "cursor": first["pagination"]["next_cursor"]})
    ).json()

    # Then the pages hold all five once, newest first, each naming its dead letter queue
    rows = first["data"] + second["data"]
    assert [(r["payload"]["label"], r["queue"]) for r in rows] == [
        ("e", "mail-dlq"), ("d", DLQ), ("c", DLQ), ("b", DLQ), ("a", DLQ)
    ]  # fmt: skip
    assert rows[0]["id"] == late
    assert first["pagination"] == {"total": 5, "has_more": True, "limit": 3,
                                   "next_cursor": first["pagination"]["next_cursor"]}  # fmt: skip
    assert second["pagination"]["next_cursor"] is None and not second["pagination"]["has_more"]
    assert first["page"] is None


async def test_the_merged_list_takes_the_filters(
    client: httpx.AsyncClient, seeded: dict[str, str], make_worker: MakeWorker, other: Queue
) -> None:
    await dead_letter(make_worker, other, [job("email.send", "e")], dlq="mail-dlq")

    sent = (await client.get(ALL, params={"job_type": "email.send"})).json()
    texts = (await client.get(ALL, params={"args": '"to":"'})).json()

    assert {r["payload"]["label"] for r in sent["data"]} == {"a", "d", "e"}
    assert sent["total"] == 3
    assert {r["payload"]["label"] for r in texts["data"]} == {"a", "d"}
    assert texts["total"] is None


async def test_a_bad_cursor_of_the_merged_list_is_a_422(client: httpx.AsyncClient) -> None:
    response = await client.get(ALL, params={"cursor": "nope"})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "cursor"


async def test_the_dead_letter_queues_are_listed(
    client: httpx.AsyncClient, seeded: dict[str, str], make_worker: MakeWorker, other: Queue
) -> None:
    await dead_letter(make_worker, other, [job("email.send", "e")], dlq="mail-dlq")

    response = await client.get(f"{ALL}/queues")

    assert response.json() == {"queues": [DLQ, "mail-dlq"]}


async def original_id(client: httpx.AsyncClient, dead_letter_id: str) -> str:
    body: dict[str, Any] = (await client.get(f"/api/dlq/{dead_letter_id}",
                                             params={"dlq": DLQ})).json()  # fmt: skip
    return str(body["_dlqMeta"]["originalJobId"])


async def test_a_job_is_found_by_its_own_id_in_any_dead_letter_queue(
    client: httpx.AsyncClient, seeded: dict[str, str], make_worker: MakeWorker, other: Queue
) -> None:
    # Given the dead letter b in jobs-dlq and e in mail-dlq, and their original jobs' ids
    [e] = await dead_letter(make_worker, other, [job("email.send", "e")], dlq="mail-dlq")
    async with Queue("mail-dlq", connection=other.client, prefix=other.prefix) as mail:
        e_letter = await mail.peek_dead_letter(e)
    assert e_letter is not None and e_letter.dead_letter is not None
    b_job = await original_id(client, seeded["b"])

    # When each is looked up by the job's id, anywhere, then in the right and the wrong queue
    found_b = await client.get(f"{ALL}/original/{b_job}")
    found_e = await client.get(f"{ALL}/original/{e_letter.dead_letter.original_job_id}")
    in_queue = await client.get(f"{ALL}/original/{b_job}", params={"dlq": DLQ})
    wrong_queue = await client.get(f"{ALL}/original/{b_job}", params={"dlq": "mail-dlq"})
    unknown = await client.get(f"{ALL}/original/never-was")
    bad = await client.get(f"{ALL}/original/{b_job}", params={"dlq": "a{x}"})

    # Then each dead letter is found with its queue, and the misses are 404s
    assert found_b.status_code == 200, found_b.text
    assert (found_b.json()["id"], found_b.json()["queue"]) == (seeded["b"], DLQ)
    assert (found_e.json()["id"], found_e.json()["queue"]) == (e, "mail-dlq")
    assert in_queue.json()["id"] == seeded["b"]
    assert wrong_queue.status_code == unknown.status_code == 404
    assert unknown.json()["error"]["message"] == (
        "no dead letter of job 'never-was' in any dead letter queue"
    )
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "dlq"
