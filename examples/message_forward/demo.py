"""``make demo``: the message-forward service end to end on an embedded Redis.

It starts a private redis-server and the service (HTTP on a free local port), posts messages
as a listener would — two to a channel that was deleted, so they fail for good, one to a
channel that times out once and succeeds on the retry 5 s later, and one malformed — then
prints the health report, the dead letters and the dashboard's address, and stops cleanly.
``--keep-running`` keeps the service up (and the dashboard open) until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import socket
import sys
from datetime import datetime, timezone
from typing import Any

import httpx
import uvicorn

from lazarus import UnrecoverableError
from lazarus.embedded import EmbeddedRedis

from .app import create_app
from .consumer import log_payload
from .payload import ForwardJob
from .service import Service
from .settings import Settings

DELETED_CHANNEL = -1002
FLAKY_CHANNEL = -1003
MESSAGES = 20
TIMEOUT_S = 60.0


class DemoForwarder:
    """Logs each message, as the consumer does, except for the two troubled channels."""

    def __init__(self) -> None:
        self.flaked: set[int] = set()

    async def __call__(self, message: ForwardJob) -> None:
        if message.source_channel_id == DELETED_CHANNEL:
            raise UnrecoverableError(f"channel {DELETED_CHANNEL} was deleted")
        if message.source_channel_id == FLAKY_CHANNEL and message.message_id not in self.flaked:
            self.flaked.add(message.message_id)
            raise TimeoutError("the forwarding API did not answer within 10 s")
        await log_payload(message)


def messages() -> list[dict[str, Any]]:
    """What the listener posts: ``MESSAGES`` messages, two of them to the deleted channel and
    one to the flaky one."""
    now = datetime.now(timezone.utc).isoformat()
    out = []
    for n in range(1, MESSAGES + 1):
        channel = {5: DELETED_CHANNEL, 11: DELETED_CHANNEL, 8: FLAKY_CHANNEL}.get(n, -1001)
        body: dict[str, Any] = {"messageId": n, "sourceChannelId": channel, "timestamp": now}
        if n % 4 == 0:
            body.update(mediaType="photo", mediaFileId=f"photo-{n}", caption=f"photo {n}")
        else:
            body["text"] = f"message {n}"
        out.append(body)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def send_and_wait(client: httpx.AsyncClient, service: Service) -> None:
    for body in messages():
        response = await client.post("/messages", json=body)
        response.raise_for_status()
    bad = await client.post("/messages", json={"sourceChannelId": -1001, "text": "no id"})
    print(f"A malformed message is refused: {bad.status_code} {bad.json()['error']['message']}")
    print(f"Posted {MESSAGES} messages; waiting for the consumer (one retry takes 5 s)...")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT_S
    while loop.time() < deadline:
        report = (await client.get("/health")).json()
        done = report["queue"]["completed"] + report["deadLetterQueue"]["depth"]
        if done == MESSAGES and report["queue"]["active"] == 0:
            return
        await asyncio.sleep(0.2)
    raise SystemExit("the demo timed out")


async def show(client: httpx.AsyncClient, service: Service, base: str) -> None:
    print("\nGET /health")
    print(json.dumps((await client.get("/health")).json(), indent=2))
    flaky = await service.queue.get_job(f"{FLAKY_CHANNEL}-8")
    if flaky is not None:
        print(f"\nJob {flaky.id} timed out once and completed on attempt "
              f"{flaky.attempts_started} after the 5 s backoff.")  # fmt: skip
    print(f"\nDead letters in {service.settings.dead_letter_queue}:")
    for letter in await service.dead_letters.get_dead_letter_jobs():
        meta = letter.dead_letter
        assert meta is not None
        print(f"  {meta.original_job_id:>10}  {meta.reason:<14} {meta.failed_reason}")
    print(f"\nDashboard: {base}/dashboard")
    print(f"Dead letters: {base}/dashboard/queues/{service.settings.dead_letter_queue}"
          "/dead-letters")  # fmt: skip


async def run(url: str, keep_running: bool) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    service = Service(Settings(redis_url=url), forward=DemoForwarder())
    config = uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving  # raises what stopped it
            raise SystemExit("the service did not start")
        await asyncio.sleep(0.05)
    print(f"message-forward is up at {base} (Redis at {url})")
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            await send_and_wait(client, service)
            await show(client, service, base)
        if keep_running:
            print("Serving until Ctrl-C.")
            await asyncio.Event().wait()
    finally:
        server.should_exit = True
        await serving
    print("Stopped cleanly.")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.message_forward.demo")
    parser.add_argument("--keep-running", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, format="  %(levelname)s %(name)s: %(message)s", stream=sys.stdout
    )
    logging.getLogger("message_forward.consumer").setLevel(logging.INFO)  # the payloads
    with EmbeddedRedis() as redis_server, contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(redis_server.url, args.keep_running))


if __name__ == "__main__":
    main()
