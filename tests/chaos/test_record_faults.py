"""Faults around the record and webhooks: exporters SIGKILLed mid-batch, PostgreSQL restarted
mid-run, the webhook receiver down for 30 s. Afterwards: exactly one row per dead letter,
every change applied in order, every dead letter's webhook delivered."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from standardwebhooks.webhooks import Webhook

from lazarus import Job, Queue, UnrecoverableError, Worker
from lazarus._keys import QueueKeys
from lazarus.record import migrate, open_database

from ..record.postgres import PostgresServer, binary
from ..record.receiver import Receiver
from .harness import PREFIX, Scenario, wait_for
from .report import Findings

pytestmark = pytest.mark.chaos
SECRET = "whsec_" + base64.b64encode(b"chaos-chaos-chaos-chaos-chaos!!!").decode()
BATCHES = 6
PER_BATCH = 60


async def reject(job: Job) -> None:
    raise UnrecoverableError("rejected")


class Exporters:
    """``lazarus record export`` processes, as an operator would run them."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env
        self.live: list[subprocess.Popen[bytes]] = []
        self.killed = 0

    def spawn(self) -> None:
        log = open(self.tmp / f"exporter{len(self.live) + self.killed}.log", "wb")  # noqa: SIM115
        self.live.append(subprocess.Popen(
            [sys.executable, "-m", "lazarus.cli", "record", "export", "--prefix", PREFIX,
             "--claim-idle", "3", "--webhook-retry-cap", "4"],
            env={**os.environ, **self.env}, stdout=log, stderr=subprocess.STDOUT,
        ))  # fmt: skip

    def kill_one(self) -> None:
        process = self.live.pop(0)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        self.killed += 1

    def stop(self) -> None:
        for process in self.live:
            process.send_signal(signal.SIGTERM)
        for process in self.live:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        self.live = []


async def record_rows(url: str) -> dict[str, dict[str, Any]]:
    db = open_database(url)
    try:
        rows = await db.fetch("SELECT id, status FROM dead_letters")
        events = await db.fetch(
            "SELECT dead_letter_id, event FROM dead_letter_events ORDER BY outbox_position"
        )
    finally:
        await db.close()
    found = {r["id"]: {"status": r["status"], "events": []} for r in rows}
    for e in events:
        found.setdefault(e["dead_letter_id"], {"status": None, "events": []})
        found[e["dead_letter_id"]]["events"].append(e["event"])
    return found


@pytest.mark.skipif(binary("postgres") is None, reason="PostgreSQL is not installed")
@pytest.mark.timeout(300)
async def test_exporters_killed_postgres_restarted_receiver_down(
    scenario: Scenario, tmp_path: Path
) -> None:
    # Given Redis, PostgreSQL (migrated), a receiver, and two exporters delivering webhooks
    server = scenario.redis()
    postgres = PostgresServer()
    postgres.start()
    receiver = Receiver().start()
    url = postgres.create_database("chaos")
    db = open_database(url)
    await migrate(db)
    await db.close()
    raw = scenario.raw(server)
    await raw.sadd(QueueKeys(PREFIX, "dlq").dead_letter_registry, "dlq")
    env = {"LAZARUS_REDIS_URL": server.url, "LAZARUS_RECORD_URL": url,
           "LAZARUS_WEBHOOK_URL": receiver.url, "LAZARUS_WEBHOOK_SECRET": SECRET}  # fmt: skip
    exporters = Exporters(tmp_path, env)
    exporters.spawn()
    exporters.spawn()
    queue, dlq = scenario.queue(server, "rec"), scenario.queue(server, "dlq")
    worker = Worker("rec", reject, connection=server.url, prefix=PREFIX,
                    dead_letter_queue="dlq", concurrency=8, block_timeout=0.5)  # fmt: skip
    faults = Faults(exporters, postgres, receiver)
    changed: dict[str, str] = {}
    try:
        await wait_for(lambda: _enabled(raw), 20)
        # When dead letters arrive in batches, some are replayed or purged, and between the
        # batches exporters are SIGKILLed, PostgreSQL restarts and the receiver is down 30 s
        for batch in range(BATCHES):
            await queue.add_bulk([{"name": f"job.{batch % 3}", "data": {"n": i, "b": batch}}
                                  for i in range(PER_BATCH)])  # fmt: skip
            await scenario.settle(queue, 30)
            await _change_some(dlq, changed)
            await faults.after(batch)
        await worker.close()
        truth = {j.id: "pending" for j in await dlq.get_dead_letter_jobs(0, -1)} | changed
        # Then, once the exporters have drained the outbox
        drained = await wait_for(lambda: _drained(url, truth, receiver), 120)
        rows = await record_rows(url)
    finally:
        await worker.close()
        exporters.stop()
        receiver.stop()
        postgres.close()
    findings = Findings("record + webhooks: exporter SIGKILL, PostgreSQL restart, receiver down",
                        len(truth), "; ".join(faults.done))  # fmt: skip
    _judge(findings, truth, rows, receiver)
    findings.notes.append(f"drained within 120 s: {drained}; {exporters.killed} SIGKILLs")
    await scenario.finish(findings)


class Faults:
    """The fault injected after each batch."""

    def __init__(self, exporters: Exporters, postgres: PostgresServer, receiver: Receiver):
        self.exporters, self.postgres, self.receiver = exporters, postgres, receiver
        self.done: list[str] = []
        self._down_at = 0.0

    async def after(self, batch: int) -> None:
        loop = asyncio.get_running_loop()
        if batch in (0, 3):  # an exporter dies while the batch is being exported
            self.exporters.kill_one()
            self.exporters.spawn()
            self.done.append("exporter SIGKILLed mid-batch")
        elif batch == 1:
            await asyncio.to_thread(self.postgres.stop)
            await asyncio.to_thread(self.postgres.start)
            self.done.append("PostgreSQL restarted")
        elif batch == 2:
            self.receiver.stop()
            self._down_at = loop.time()
        elif batch == 4:
            await asyncio.sleep(max(0.0, 30 - (loop.time() - self._down_at)))  # the fault's length
            self.receiver.start()
            self.done.append("receiver down 30 s")


async def _enabled(raw: aioredis.Redis) -> bool:
    return bool(await raw.exists(QueueKeys(PREFIX, "dlq").dl_outbox_enabled))


async def _change_some(dlq: Queue, changed: dict[str, str]) -> None:
    """Replay five pending dead letters (into a queue no worker reads) and purge five."""
    pending = [j.id for j in await dlq.get_dead_letter_jobs(0, 19) if j.id not in changed]
    for dead_letter_id in pending[:5]:
        await dlq.replay_dead_letter(dead_letter_id, queue="sink")
        changed[dead_letter_id] = "processing"  # it stays, until its new job ends
    for dead_letter_id in pending[5:10]:
        await dlq.purge_dead_letter(dead_letter_id)
        changed[dead_letter_id] = "purged"


def _delivered(receiver: Receiver) -> tuple[set[str], int]:
    """The dead letters whose arrival reached the receiver with a valid signature, and how
    many requests did not verify."""
    ids, bad = set(), 0
    for _, headers, body in list(receiver.requests):
        try:
            document = Webhook(SECRET).verify(body, headers)
        except Exception:
            bad += 1
            continue
        ids.add(document["data"]["id"])
    return ids, bad


async def _drained(url: str, truth: dict[str, str], receiver: Receiver) -> bool:
    rows = await record_rows(url)
    statuses = {i: r["status"] for i, r in rows.items()}
    return statuses == truth and _delivered(receiver)[0] >= set(truth)


def _judge(
    findings: Findings, truth: dict[str, str], rows: dict[str, dict[str, Any]], receiver: Receiver
) -> None:
    findings.lost = sorted(i for i in truth if i not in rows)
    findings.duplicated = sorted(
        i for i, r in rows.items() if len(set(r["events"])) != len(r["events"])
    )
    expected = {i: ["dead-lettered"] + ([s] if s != "pending" else []) for i, s in truth.items()}
    delivered, bad = _delivered(receiver)
    findings.broken = {
        "unknown rows": sorted(set(rows) - set(truth)),
        "wrong status": sorted(i for i in truth if i in rows and rows[i]["status"] != truth[i]),
        "changes out of order": sorted(
            i for i in truth if i in rows and rows[i]["events"] != expected[i]
        ),
        "webhook not delivered": sorted(set(truth) - delivered),
        "bad signatures": ["x"] * bad,
    }
    sent = sum(1 for _ in receiver.requests)
    findings.notes.append(f"{sent} webhook requests for {len(truth)} dead letters "
                          "(at least once: receivers drop repeats by webhook-id)")  # fmt: skip
