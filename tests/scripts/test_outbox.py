"""The outbox include called through the store's scripts: nothing is appended while the outbox
is off; once on, every change of a dead letter appends one entry, a removal with the dead
letter's fields byte for byte."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from lazarus._keys import QueueKeys

from .test_store import make_dead_letter
from .test_transitions import MAXLEN, call


@pytest.fixture
def d(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src-dlq")


async def entries(raw: aioredis.Redis, d: QueueKeys) -> list[dict[str, str]]:
    return [fields for _, fields in await raw.xrange(d.dl_outbox)]


async def test_no_entry_is_appended_while_the_outbox_is_off(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")

    await call(
        raw,
        "purge_dead_letters",
        [d.dl, d.events, d.meta, d.job("d1")],
        [MAXLEN, "", 2000, "", "d1"],
    )

    assert await raw.exists(d.dl_outbox) == 0


async def test_an_outbox_turned_on_between_two_calls_of_a_script_gets_the_second_ones_entry(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    # Given a script that ran while the outbox was off (it remembers that for its call only)
    await make_dead_letter(raw, d, "d1")
    await make_dead_letter(raw, d, "d2")
    purge = [d.dl, d.events, d.meta, d.job("d1")], [MAXLEN, "", 2000, "", "d1"]
    await call(raw, "purge_dead_letters", *purge)

    # When the outbox is turned on and the same script runs again
    await raw.set(d.dl_outbox_enabled, "1")
    await call(
        raw,
        "purge_dead_letters",
        [d.dl, d.events, d.meta, d.job("d2")],
        [MAXLEN, "", 2000, "", "d2"],
    )

    # Then the second call appends its entry
    assert [(e["event"], e["id"]) for e in await entries(raw, d)] == [("purged", "d2")]


async def test_arrival_appends_an_entry_with_its_indexed_values_but_no_copy_of_it(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await raw.set(d.dl_outbox_enabled, "1")

    await make_dead_letter(raw, d, "d1", data='{"b":1,"a":12345678901234567890}')

    [entry] = await entries(raw, d)
    assert entry["event"] == "dead-lettered"
    assert entry["id"] == "d1"
    assert entry["status"] == "pending"
    assert (entry["v:q"], entry["v:n"], entry["v:e"]) == ("src", "email", "TimeoutError")
    assert entry["v:r"] == "attempts_exhausted"
    assert not [f for f in entry if f.startswith("h:")]


async def test_purge_appends_an_entry_with_the_dead_letters_fields_as_they_were(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await raw.set(d.dl_outbox_enabled, "1")
    await make_dead_letter(raw, d, "d1", data='{"b":1,"a":12345678901234567890}')

    await call(
        raw,
        "purge_dead_letters",
        [d.dl, d.events, d.meta, d.job("d1")],
        [MAXLEN, "", 2000, "", "d1"],
    )

    arrival, purge = await entries(raw, d)
    assert arrival["event"] == "dead-lettered"
    assert (purge["event"], purge["id"], purge["status"]) == ("purged", "d1", "purged")
    assert purge["h:data"] == '{"b":1,"a":12345678901234567890}'
    assert purge["h:dlq:sourceQueue"] == "src"
    assert purge["h:dlq:status"] == "pending"
    assert await raw.exists(d.job("d1")) == 0


async def test_a_purge_that_finds_nothing_appends_nothing(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await raw.set(d.dl_outbox_enabled, "1")

    await call(
        raw, "purge_dead_letters", [d.dl, d.events, d.meta, d.job("x")], [MAXLEN, "", 2000, "", "x"]
    )

    assert await raw.exists(d.dl_outbox) == 0


async def test_forget_outbox_keeps_an_outbox_another_group_drains_and_deletes_the_last(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    # Given an outbox, switched on, drained by two groups, each having copied the store
    for group in ("record", "webhook:ops"):
        await raw.xgroup_create(d.dl_outbox, group, id="0", mkstream=True)
        await raw.set(d.dl_outbox_copied(group), "1")
    await raw.set(d.dl_outbox_enabled, "1")
    keys = [d.dl_outbox, d.dl_outbox_enabled]

    # When the record's group is forgotten, then the webhook's
    first = await call(raw, "forget_outbox", [*keys, d.dl_outbox_copied("record")], ["record"])
    after_first = await raw.exists(d.dl_outbox, d.dl_outbox_enabled)
    last = await call(raw, "forget_outbox", [*keys, d.dl_outbox_copied("webhook:ops")],
                      ["webhook:ops"])  # fmt: skip

    # Then the first leaves the outbox on for the other group, the last switches it off
    assert (first, after_first) == (1, 2)
    assert last == 0
    assert await raw.exists(*keys, d.dl_outbox_copied("record"),
                            d.dl_outbox_copied("webhook:ops")) == 0  # fmt: skip


async def test_forget_outbox_switches_off_an_outbox_left_on_without_a_stream(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await raw.set(d.dl_outbox_enabled, "1")

    left = await call(
        raw, "forget_outbox", [d.dl_outbox, d.dl_outbox_enabled, d.dl_outbox_copied("g")], ["g"]
    )

    assert left == 0
    assert await raw.exists(d.dl_outbox_enabled) == 0
