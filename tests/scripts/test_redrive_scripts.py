"""The redrive and retention scripts called directly: claim_dead_letters,
release_dead_letter_claims, acquire_lease and prune_dead_letters — the keys they leave, their
replies and events."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus._keys import QueueKeys

from .test_store import make_dead_letter
from .test_transitions import MAXLEN, NOW, call, events


@pytest.fixture
def d(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src-dlq")


async def claim(raw: aioredis.Redis, d: QueueKeys, holder: str, *ids: str, now: int = NOW,
                ms: int = 1_000) -> Any:  # fmt: skip
    keys = [d.dl, d.dl_claims, d.dl_claimers, d.job_prefix]
    return await call(raw, "claim_dead_letters", keys, [now, holder, ms, *ids])


async def set_status(raw: aioredis.Redis, d: QueueKeys, dl_id: str, status: str) -> None:
    args = [dl_id, status, NOW, "redriver", "", "", MAXLEN]
    assert (await call(raw, "set_dead_letter_status", [d.dl, d.events, d.job(dl_id)], args))[0] == 1


# -- claim_dead_letters / release_dead_letter_claims -------------------------------------------


async def test_claim_takes_pending_dead_letters_and_returns_their_fields(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1", **{"dlq:replayCount": 2})

    reply = await claim(raw, d, "r1", "d1")

    assert reply == [["src", "email", "TimeoutError", "attempts_exhausted", "SMTP timeout",
                      str(NOW), "", "2"]]  # fmt: skip
    assert await raw.zrange(d.dl_claims, 0, -1, withscores=True) == [("d1", NOW + 1_000)]
    assert await raw.hgetall(d.dl_claimers) == {"d1": "r1"}


async def test_claim_refuses_what_another_holds_until_it_expires(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")
    await claim(raw, d, "r1", "d1")

    assert await claim(raw, d, "r2", "d1", now=NOW + 999) == [0]
    assert (await claim(raw, d, "r1", "d1", now=NOW + 500))[0] != 0  # the holder renews
    assert await raw.zscore(d.dl_claims, "d1") == NOW + 1_500

    assert (await claim(raw, d, "r2", "d1", now=NOW + 1_500))[0] != 0
    assert await raw.hgetall(d.dl_claimers) == {"d1": "r2"}


async def test_claim_skips_what_is_not_pending_or_not_there(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")
    await set_status(raw, d, "d1", "manual")

    assert await claim(raw, d, "r1", "d1", "ghost") == [0, 0]
    assert await raw.exists(d.dl_claims, d.dl_claimers) == 0


async def test_claim_drops_expired_claims(raw: aioredis.Redis, d: QueueKeys) -> None:
    await make_dead_letter(raw, d, "d1")
    await make_dead_letter(raw, d, "d2")
    await claim(raw, d, "dead", "d1")

    await claim(raw, d, "r2", "d2", now=NOW + 5_000)

    assert await raw.zrange(d.dl_claims, 0, -1) == ["d2"]
    assert await raw.hgetall(d.dl_claimers) == {"d2": "r2"}


async def test_release_frees_only_the_holders_claims(raw: aioredis.Redis, d: QueueKeys) -> None:
    await make_dead_letter(raw, d, "d1")
    await make_dead_letter(raw, d, "d2")
    await claim(raw, d, "r1", "d1")
    await claim(raw, d, "r2", "d2")

    released = await call(raw, "release_dead_letter_claims", [d.dl_claims, d.dl_claimers],
                          ["r1", "d1", "d2"])  # fmt: skip

    assert released == 1
    assert await raw.hgetall(d.dl_claimers) == {"d2": "r2"}
    assert await raw.zrange(d.dl_claims, 0, -1) == ["d2"]


# -- acquire_lease ---------------------------------------------------------------------------


async def test_a_lease_is_taken_renewed_and_refused_to_others(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    key = d.dl_leader("prune")

    assert await call(raw, "acquire_lease", [key], ["a", 5_000]) == 1
    assert await call(raw, "acquire_lease", [key], ["b", 5_000]) == 0
    await raw.pexpire(key, 10)
    assert await call(raw, "acquire_lease", [key], ["a", 5_000]) == 1
    assert 4_000 < await raw.pttl(key) <= 5_000
    assert await raw.get(key) == "a"


# -- prune_dead_letters ----------------------------------------------------------------------


async def prune(raw: aioredis.Redis, d: QueueKeys, budget: int, max_count: str,
                count_action: str, *triples: str) -> Any:  # fmt: skip
    keys = [d.dl, d.events, d.meta, d.job_prefix]
    return await call(raw, "prune_dead_letters", keys,
                      [NOW, MAXLEN, budget, max_count, count_action, *triples])  # fmt: skip


async def test_prune_by_age_deletes_and_archives_the_expired_heads(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "old", **{"dlq:deadLetteredAt": NOW - 100})
    await make_dead_letter(raw, d, "failed", **{"dlq:deadLetteredAt": NOW - 100})
    await make_dead_letter(raw, d, "young")
    await set_status(raw, d, "failed", "failed")
    cutoff = str((NOW - 50) * 1000)

    reply = await prune(raw, d, 10, "", "delete",
                        "pending", cutoff, "delete", "failed", cutoff, "archive")  # fmt: skip

    assert reply == [1, 1, 0]
    assert await raw.exists(d.job("old")) == 0
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["young"]
    assert await raw.zrange(d.dl_index("s", "archived"), 0, -1) == ["failed"]
    assert await raw.hget(d.job("failed"), "dlq:status") == "archived"
    assert await raw.hmget(d.meta, "count:pruned:deleted", "count:pruned:archived") == ["1", "1"]
    last = (await events(raw, d))[-1]
    assert last == {"event": "pruned", "count": "2", "deleted": "1", "archived": "1",
                    "jobIds": "old,failed"}  # fmt: skip


async def test_prune_by_count_takes_the_oldest_across_statuses_within_the_budget(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    for i, at in enumerate((NOW - 30, NOW - 20, NOW - 10, NOW)):
        await make_dead_letter(raw, d, f"d{i}", **{"dlq:deadLetteredAt": at})
    await set_status(raw, d, "d1", "manual")

    assert await prune(raw, d, 1, "1", "delete") == [1, 0, 1]
    assert await prune(raw, d, 5, "1", "delete") == [2, 0, 0]

    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["d3"]
    assert await raw.exists(d.dl_index("s", "manual")) == 0
    assert await prune(raw, d, 5, "1", "delete") == [0, 0, 0]


async def test_prune_of_an_archived_dead_letter_deletes_it(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1", **{"dlq:deadLetteredAt": NOW - 100})
    await set_status(raw, d, "d1", "archived")

    reply = await prune(raw, d, 5, "", "archive", "archived", str(NOW * 1000), "archive")

    assert reply == [1, 0, 0]
    assert await raw.exists(d.job("d1"), d.dl_index("s", "archived")) == 0
