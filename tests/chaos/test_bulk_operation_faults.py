"""A bulk replay started over HTTP while the ``lazarus serve`` that runs it is SIGKILLed (and
once SIGTERMed), again and again: the other server of the prefix takes it over once its lease
runs out, and goes on from the operation's snapshot. Meanwhile a client removes every other
replayed job before it runs, which sends its dead letter back to ``pending`` in its place in
the store: the dead letters a resume must not replay again. Every dead letter is replayed
once: none skipped, none twice, and the operation ends ``done``, counting each."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from lazarus import Queue

from .dead_letters import dead_letter_each
from .harness import Scenario
from .report import Findings
from .test_workflow_faults import Server, call

pytestmark = pytest.mark.chaos

LETTERS, KILLS, LEASE = 1_500, 5, "2"
SOURCE, DLQ = "bulk-src", "bulk-dlq"
RATE, BATCH = 200, 50  # a batch every quarter of a second: kills land inside one


class Remover:
    """A client that removes every other replayed job before it runs: its dead letter goes
    back to ``pending``, where the operation found it, replayed once already."""

    def __init__(self, source: Queue) -> None:
        self.source, self.removed = source, 0
        self.seen: set[str] = set()
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Exception):  # a job run or removed meanwhile
                for job in await self.source.get_waiting(0, -1):
                    if job.id in self.seen:
                        continue
                    self.seen.add(job.id)
                    if len(self.seen) % 2 == 0:
                        await self.source.remove(job.id)
                        self.removed += 1
            await asyncio.sleep(0.05)


def holder(record: dict[str, Any], servers: list[Server]) -> Server | None:
    """The server that holds the operation now, if one does."""
    if record.get("status") != "running":
        return None
    pid = record["server"].split(":")[-2]
    return next((s for s in servers if s.process and str(s.process.pid) == pid), None)


async def test_a_bulk_replay_rides_the_kills_of_its_servers(scenario: Scenario) -> None:
    # Given dead letters, two lazarus serve on the prefix (bulk operations leased for 2 s)
    # and a client removing every other replayed job before it runs
    server = scenario.redis()
    source, dlq = scenario.queue(server, SOURCE), scenario.queue(server, DLQ)
    made = await dead_letter_each(server, source, [{"i": i} for i in range(LETTERS)], DLQ)
    log = (scenario.tmp / "serve.err").open("ab")
    servers = [Server(server.url, log, "--bulk-lease", LEASE) for _ in range(2)]
    for serve in servers:
        serve.start()
    remover = Remover(source)
    removing = asyncio.create_task(remover.run())
    kills: Counter[str] = Counter()
    seen: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=servers[0].url) as client:
        # When a replay of every dead letter is started on the first, and whichever server
        # holds it is killed, KILLS times (the fourth a SIGTERM), each within a batch's time
        # (0.25 s) of a batch's progress, and started again
        started = (await call(client, "POST", "/api/dead-letters/bulk", json={
            "action": "replay", "dlq": DLQ, "all": True, "rate": RATE,
            "batch_size": BATCH})).json()  # fmt: skip
        url = f"/api/dead-letters/bulk/{started['id']}"
        record: dict[str, Any] = started
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and record["status"] in ("running", "interrupted"):
            await asyncio.sleep(0.02)
            before = record
            record = (await call(client, "GET", url)).json()
            seen.append(record)
            target = holder(record, servers)
            if sum(kills.values()) >= KILLS or target is None or record["done"] == before["done"]:
                continue
            await asyncio.sleep(random.uniform(0, 0.25))  # into the pause, or the next batch
            if sum(kills.values()) == 3:
                target.stop()  # SIGTERM: it gives its lease up
                kills["SIGTERM"] += 1
            else:
                target.kill()
                kills["SIGKILL"] += 1
            target.start()
        remover.stop.set()
        await removing
    for serve in servers:
        serve.stop()

    # Then each dead letter was replayed once, by one server or another, and the operation
    # says done, with each of them counted
    findings = Findings(
        "bulk replay over HTTP, its servers SIGKILLed", LETTERS,
        f"a replay of {LETTERS:,} dead letters at {RATE}/s on 2 lazarus serve (lease {LEASE} s); "
        f"{kills['SIGKILL']} SIGKILLs and {kills['SIGTERM']} SIGTERM of the server holding it, "
        "each within a batch's time of its progress; every other replayed job removed before "
        "it ran",
    )  # fmt: skip
    replays = await _replays(dlq, list(made))
    findings.lost = sorted(i for i, n in replays.items() if n <= 0)  # skipped, or gone
    findings.duplicated = sorted(i for i, n in replays.items() if n > 1)  # replayed twice
    findings.broken["operation not done"] = [] if record["status"] == "done" else [str(record)]
    once = sum(n == 1 for n in replays.values())
    findings.broken["done miscounted"] = (
        [] if record["done"] == once else [f"{record['done']} done, {once} replayed"]
    )
    findings.spurious_stalls = None
    findings.notes.append(
        f"resumed {record.get('resumes', 0)} times; {record['done']} reported done, "
        f"{once} replayed; {remover.removed} replayed jobs removed; {len(seen)} polls"
    )
    await scenario.finish(findings)


async def _replays(dlq: Queue, ids: list[str]) -> dict[str, int]:
    """How many times each dead letter went to ``processing`` (its timeline)."""
    counts = {}
    for dl_id in ids:
        letter = await dlq.peek_dead_letter(dl_id)
        meta = letter.dead_letter if letter is not None else None
        counts[dl_id] = sum(c.to == "processing" for c in meta.timeline) if meta else -1
    return counts
