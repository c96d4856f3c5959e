"""``lazarus record`` and ``lazarus webhooks`` through click's runner, and ``lazarus record
export`` as a real process stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import redis.asyncio as aioredis
from click.testing import CliRunner, Result

from lazarus import Queue, Worker
from lazarus._keys import QueueKeys
from lazarus.cli import main

from ..conftest import wait_until
from .helpers import dead_letter
from .receiver import Receiver
from .test_webhooks import SECRET

MakeWorker = Callable[..., Worker]


async def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    runner = CliRunner(env={"COLUMNS": "200", **(env or {})})
    return await asyncio.to_thread(runner.invoke, main, list(args))


async def test_migrate_then_export_list_show_and_replay(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    sqlite_url: str, redis_url: str,
) -> None:  # fmt: skip
    # Given a migrated record and an export running as a real process
    env = {"LAZARUS_RECORD_URL": sqlite_url, "LAZARUS_REDIS_URL": redis_url}
    migrated = await invoke("record", "migrate", env=env)
    again = await invoke("record", "migrate", env=env)
    assert migrated.exit_code == 0 and "applied migrations [1]" in migrated.output
    assert "up to date" in again.output
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    exporter = subprocess.Popen(
        [sys.executable, "-m", "lazarus.cli", "record", "export", "--prefix", prefix],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        # When a job dies
        await wait_until(lambda: _exists(raw, QueueKeys(prefix, dlq.name).dl_outbox_enabled))
        [letter] = await dead_letter(make_worker, queue, dlq, [("email.send", {"to": "x"})])

        async def listed() -> bool:
            result = await invoke("record", "list", "--json", env=env)
            return result.exit_code == 0 and json.loads(result.stdout)["total"] == 1

        await wait_until(listed, message="the dead letter in the record")
    finally:
        exporter.send_signal(signal.SIGTERM)
        output = exporter.communicate(timeout=30)[0].decode()
    # Then the exporter stopped cleanly on SIGTERM, and the record shows and replays it
    assert exporter.returncode == 0, output
    listed = (await invoke("record", "list", env=env)).stdout
    assert letter.id in listed and "email.send" in listed and "UnrecoverableError" in listed
    assert "1 dead letters in the record; page 1 of 1" in listed
    shown = json.loads((await invoke("record", "show", letter.id, env=env)).stdout)
    assert shown["jobPayload"] == {"to": "x"} and shown["status"] == "pending"
    replayed = await invoke("record", "replay", letter.id, "--prefix", prefix, env=env)
    assert replayed.exit_code == 0, replayed.output
    assert await dlq.get_dead_letter_count() == 0


async def _exists(raw: aioredis.Redis, key: str) -> bool:
    return bool(await raw.exists(key))


async def test_list_on_a_record_never_migrated_says_to_migrate(sqlite_url: str) -> None:
    result = await invoke("record", "list", "--record-url", sqlite_url)

    assert result.exit_code == 1
    assert "lazarus record migrate" in result.output


async def test_list_refuses_a_status_no_row_can_hold_naming_the_option(sqlite_url: str) -> None:
    # Given a migrated record
    assert (await invoke("record", "migrate", "--record-url", sqlite_url)).exit_code == 0

    for status in ("bogus", "PENDING"):
        # When the operator lists by a status no row holds (it said "0 dead letters")
        result = await invoke("record", "list", "--status", status, "--record-url", sqlite_url)

        # Then it is a usage error naming --status and its choices
        assert result.exit_code == 2, result.output
        assert "Invalid value for '--status'" in result.output
        assert "'pending', 'manual'" in result.output


async def test_list_refuses_a_queue_name_no_row_can_hold_naming_the_option(
    sqlite_url: str,
) -> None:
    # Given a migrated record
    assert (await invoke("record", "migrate", "--record-url", sqlite_url)).exit_code == 0

    # When the operator lists by a name that is no queue's
    result = await invoke("record", "list", "--queue", "bad{", "--record-url", sqlite_url)

    # Then it is a usage error naming --queue
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--queue'" in result.output


async def test_webhooks_test_sends_a_signed_event_and_exits_by_the_answer() -> None:
    receiver = Receiver().start()
    try:
        ok = await invoke("webhooks", "test", receiver.url, "--secret", SECRET)
        receiver.status = 500
        refused = await invoke("webhooks", "test", receiver.url, "--secret", SECRET)
        bad = await invoke("webhooks", "test", receiver.url, "--secret", "nope")
    finally:
        receiver.stop()

    assert ok.exit_code == 0 and "delivered: HTTP 204" in ok.output
    assert refused.exit_code == 1 and "HTTP 500" in refused.output
    assert bad.exit_code == 2 and "whsec_" in bad.output
    assert len(receiver.requests) == 2


async def test_a_webhook_url_without_a_secret_is_a_usage_error(sqlite_url: str) -> None:
    result = await invoke(
        "record", "export", "--webhook-url", "http://127.0.0.1:9/x", "--record-url", sqlite_url
    )

    assert result.exit_code == 2
    assert "LAZARUS_WEBHOOK_SECRET" in result.output


async def test_webhooks_forget_drops_the_endpoints_place_in_every_outbox(
    raw: aioredis.Redis, prefix: str, redis_url: str
) -> None:
    # Given a webhook's group on the outbox of two dead letter queues
    from lazarus.record.outbox import Outbox

    for name in ("a-dlq", "b-dlq"):
        await raw.sadd(QueueKeys(prefix, name).dead_letter_registry, name)
        await Outbox(raw, prefix, group="webhook:ops", consumer="c").enable(name)

    # When it is forgotten
    result = await invoke("webhooks", "forget", "ops", "--redis-url", redis_url,
                          "--prefix", prefix)  # fmt: skip

    # Then no outbox is kept for it any more
    assert result.exit_code == 0, result.output
    assert "2 dead letter queues" in result.output
    for name in ("a-dlq", "b-dlq"):
        keys = QueueKeys(prefix, name)
        assert await raw.exists(keys.dl_outbox, keys.dl_outbox_enabled) == 0
