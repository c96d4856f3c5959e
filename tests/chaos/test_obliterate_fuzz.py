"""Fuzzed queue names and prefixes against ``Queue.obliterate()``: a queue deletes its own
keys and nobody else's, and a name it cannot use is refused with a clear error."""

from __future__ import annotations

import random
import unicodedata

import pytest
import redis.asyncio as aioredis

from lazarus import Queue
from lazarus._keys import QueueKeys

from .harness import Scenario
from .report import Findings

pytestmark = pytest.mark.chaos

CASES = 2000
# Glob characters (and the escape character) first: a SCAN pattern built from a name is
# where a queue could reach into another queue's keys.
ALPHABET = ["a", "b", "\\", "*", "?", "[", "]", "^", "-", "!", ":", "é", "{", " ", "\x85",
            "\x9b", "\ud800"]  # fmt: skip
FOREIGN_CHARS = ["a", "b", "\\", "*", "?", "[", "]"]
FOREIGN_PREFIXES = ["fz", "fz\\"]


def foreign_queues() -> list[tuple[str, str]]:
    """``(prefix, name)`` of the queues that must survive: every name of one or two glob
    characters under ``fz``, and the one-character names under ``fz\\``."""
    names = FOREIGN_CHARS + [a + b for a in FOREIGN_CHARS for b in FOREIGN_CHARS]
    return [("fz", n) for n in names] + [("fz\\", n) for n in FOREIGN_CHARS]


def fuzz_case(rng: random.Random) -> tuple[str, str]:
    draw = rng.random()
    if draw < 0.5:
        prefix = "fz"
    elif draw < 0.7:
        prefix = "fz\\"
    else:
        prefix = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 4)))
    return prefix, "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3)))


def forbidden(text: str) -> bool:
    """What the docs forbid in a name: braces, whitespace, control characters."""
    return any(c in "{}" or c.isspace() or unicodedata.category(c) == "Cc" for c in text)


def clear(exc: BaseException) -> bool:
    """A refusal the docs promise: ValueError or TypeError naming the field (a codec's
    UnicodeError from deep in the client is not one)."""
    return (
        isinstance(exc, (ValueError, TypeError))
        and not isinstance(exc, UnicodeError)
        and any(field in str(exc) for field in ("name", "prefix"))
    )


async def plant(client: aioredis.Redis) -> set[str]:
    """(Re)create the foreign queues, one job each; returns every key that is not a registry."""
    for prefix, name in foreign_queues():
        await Queue(name, connection=client, prefix=prefix).add("keep", {}, job_id="f")
    return {k async for k in client.scan_iter(count=1000) if not k.endswith(":queues")}


def own_keys(prefix: str, name: str) -> list[str]:
    keys = QueueKeys(prefix, name)
    return [keys.wait, keys.events, keys.meta, keys.marker, keys.job("mine")]


@pytest.mark.timeout(180)
async def test_obliterate_fuzzed_names(scenario: Scenario) -> None:
    # Given 63 queues whose names are made of glob characters, under two prefixes
    server = scenario.redis()
    client = scenario.raw(server)
    foreign = await plant(client)
    planted = {(p, n) for p, n in foreign_queues()}
    findings = Findings("fuzzed names, obliterate()", len(planted),
                        f"{CASES} fuzzed (prefix, queue name) pairs obliterated")  # fmt: skip
    findings.spurious_stalls = None
    reached = findings.broken.setdefault("obliterate deleted another queue's keys", [])
    unclear = findings.broken.setdefault("unclear error for a bad name", [])
    accepted = findings.broken.setdefault("name with a forbidden character accepted", [])
    left = findings.broken.setdefault("keys left after obliterate", [])
    rng, refused = random.Random(11), 0

    # When each fuzzed queue adds a job and is obliterated
    for _ in range(CASES):
        prefix, name = fuzz_case(rng)
        if (prefix, name) in planted:
            continue
        try:
            queue = Queue(name, connection=client, prefix=prefix)
            await queue.add("mine", {}, job_id="mine")
            await queue.obliterate()
        except Exception as exc:
            refused += 1
            if not clear(exc):
                unclear.append(f"{(prefix, name)!r}: {type(exc).__name__}: {exc}"[:160])
            continue
        if forbidden(prefix + name):
            accepted.append(repr((prefix, name)))

        # Then none of its own keys stayed, and no foreign key went
        stayed = [k for k in own_keys(prefix, name) if await client.exists(k)]
        if stayed:
            left.append(f"{(prefix, name)!r}: {stayed[:2]}")
            await client.delete(*stayed)
        if await client.exists(*foreign) != len(foreign):
            gone = [k for k in foreign if not await client.exists(k)]
            reached.append(f"{(prefix, name)!r} deleted {len(gone)}, e.g. {gone[:2]}")
            findings.lost += [k for k in gone if ":job:" in k]
            foreign = await plant(client)

    findings.notes.append(f"pairs refused: {refused}; foreign keys watched: {len(foreign)}")
    await scenario.finish(findings)
