"""``lazarus serve`` with a record: the schema is checked at start-up, and the exporter runs
in the background while the app serves."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from lazarus import Queue, Worker
from lazarus._keys import QueueKeys
from lazarus.cli._record_options import outbox_drainers as _drainers
from lazarus.http import create_app
from lazarus.record import Record, RecordSchemaError

from ..conftest import wait_until
from .helpers import dead_letter

MakeWorker = Callable[..., Worker]


async def test_an_app_on_a_record_never_migrated_refuses_to_start(
    redis_url: str, prefix: str, sqlite_url: str
) -> None:
    app = create_app(connection=redis_url, prefix=prefix, record=sqlite_url, auth=False)

    with pytest.raises(RecordSchemaError, match="lazarus record migrate"):
        async with app.router.lifespan_context(app):
            pass
    await app.state.record.close()
    await app.state.ops.close()


@pytest.mark.usefixtures("db")
async def test_the_app_exports_dead_letters_while_it_serves(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    redis_url: str, record_url: str,
) -> None:  # fmt: skip
    # Given the app of `lazarus serve --record-url ...`, started
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    drainers = _drainers(redis_url, prefix, record_url, [], None)
    app = create_app(
        connection=redis_url, prefix=prefix, record=record_url, drainers=drainers, auth=False
    )
    record = Record(record_url, connection=raw, prefix=prefix)
    async with app.router.lifespan_context(app):
        await wait_until(
            lambda: _exists(raw, QueueKeys(prefix, dlq.name).dl_outbox_enabled),
            message="the outbox switched on",
        )
        # When a job dies
        [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])

        # Then it reaches the record without anything else running
        async def recorded() -> bool:
            return await record.get(letter.id) is not None

        await wait_until(recorded, message="the dead letter in the record")
    await record.close()


async def _exists(raw: aioredis.Redis, key: str) -> bool:
    return bool(await raw.exists(key))


def test_without_a_record_or_webhook_the_server_runs_no_drainer() -> None:
    assert _drainers("redis://x", "p", None, [], None) == []
