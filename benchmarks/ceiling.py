"""The Redis ceiling: how many jobs per second this Redis can drain when the client costs
next to nothing.

A worker's drain is bounded by its own Python and by Redis running its scripts. This drives the
very scripts a worker sends for each no-op job — ``complete_job``, which also claims the next
job — from one tight loop on one connection: ``concurrency`` jobs are claimed, then every round
completes all of them in one pipelined write and takes the next ones from the replies, reading
only each next job's id and token. What it reaches is what Redis allows on this machine; a
worker's drain divided by it is the share of Redis the worker uses (``benchmarks/run.py``
reports it beside the drain figures).

The same holds for adds one at a time: each waits for its round trip, so no client goes
faster than one command at a time over one connection allows. :func:`round_trip` measures that
floor: ``PING`` after ``PING`` over a bare asyncio connection (hiredis parsing the replies, no
client library), and the client CPU each costs. ``benchmarks/run.py`` reports it beside the
one-by-one add.

Usage::

    python benchmarks/ceiling.py [--n 20000] [--concurrency 10] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import time
import urllib.parse
import uuid
from typing import Any

import redis
from hiredis import Reader, pack_command

from lazarus import Queue, _scripts
from lazarus._keys import QueueKeys
from lazarus.embedded import EmbeddedRedis

QUEUE = "ceiling"
LOCK_MS = 30_000
MAX_EVENTS = 10_000
WORKER = "ceiling-driver"


async def _fill(url: str, prefix: str, n: int) -> None:
    queue = Queue(QUEUE, connection=url, prefix=prefix)
    try:
        for start in range(0, n, 1_000):
            await queue.add_bulk([{"name": "job", "data": {"index": i}}
                                  for i in range(start, min(start + 1_000, n))])  # fmt: skip
    finally:
        await queue.close()


def _drive(url: str, prefix: str, n: int, concurrency: int) -> float:
    """Drain ``n`` jobs with ``concurrency`` in flight; the seconds it took."""
    client = redis.Redis.from_url(url, decode_responses=True)
    keys = QueueKeys(prefix, QUEUE)
    claim, complete = _scripts.load("claim_jobs"), _scripts.load("complete_job")
    functions = loaded(client, claim, complete)
    conn = client.connection_pool.get_connection()
    try:
        started = time.perf_counter()
        held = _claimed(conn, claim, keys, concurrency, functions)
        # Two halves take turns, so that Redis always has one to run while the replies of
        # the other are read and its next round is written.
        halves = [held[::2], held[1::2]]
        in_flight: list[list[tuple[int, str, str]]] = []
        for slot_base, half in enumerate(halves):
            in_flight.append(_send(conn, complete, keys, half, slot_base, functions))
        done = 0
        while in_flight:
            batch = in_flight.pop(0)
            replies = [conn.read_response() for _ in batch]
            done += len(replies)
            following = [(r[2][0], r[2][1]) for r in replies if r[2]]
            if following:
                in_flight.append(_send(conn, complete, keys, following, batch[0][0] % 2, functions))
        elapsed = time.perf_counter() - started
    finally:
        client.connection_pool.release(conn)
        client.close()
    if done != n:
        raise RuntimeError(f"the ceiling drained {done} jobs of {n}")
    return elapsed


def loaded(client: redis.Redis, *scripts: _scripts.Script) -> bool:
    """Load ``scripts`` into the server as lazarus calls them: as functions where it has them
    (Redis 7.0 and later; returns True), else as scripts."""
    for script in scripts:
        client.script_load(script.source)
        try:
            client.function_load(script.library, replace=True)
        except redis.ResponseError as error:
            if "unknown command" not in str(error):
                raise
            return False
    return True


def _send(
    conn: Any, complete: _scripts.Script, keys: QueueKeys, jobs: list[tuple[str, str]], half: int,
    functions: bool,
) -> list[tuple[int, str, str]]:  # fmt: skip
    """Complete ``jobs`` (claiming the next ones) in one write; each job of a half has a slot
    (and reply memo) of its own, as in a worker."""
    now = int(time.time() * 1000)
    sent = [(2 * i + half, job_id, token) for i, (job_id, token) in enumerate(jobs)]
    packed = [
        pack_command(complete.command(
            [*keys.group, keys.job(job_id), keys.completed, keys.reply(WORKER, str(slot))],
            [job_id, token, now, "null", -1, -1, 0, MAX_EVENTS, 1, WORKER, LOCK_MS, ""],
            functions,
        ))
        for slot, job_id, token in sent
    ]  # fmt: skip
    conn.send_packed_command([b"".join(packed)])
    return sent


def _claimed(
    conn: Any, claim: _scripts.Script, keys: QueueKeys, count: int, functions: bool
) -> list[Any]:
    args = [int(time.time() * 1000), WORKER, LOCK_MS, count, MAX_EVENTS, uuid.uuid4().hex]
    conn.send_command(*claim.command([*keys.group, keys.reply(WORKER, "claim")], args, functions))
    reply = conn.read_response()
    return [(job[0], job[1]) for job in reply[1:] if job]


def _cpu_seconds(url: str) -> float:
    client = redis.Redis.from_url(url)
    try:
        info = client.info("cpu")
    finally:
        client.close()
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def measure(url: str, n: int, concurrency: int) -> dict[str, float]:
    """One run: the ceiling in jobs/s and Redis's CPU per job (µs)."""
    prefix = f"ceiling{uuid.uuid4().hex[:10]}"
    asyncio.run(_fill(url, prefix, n))
    try:
        before = _cpu_seconds(url)
        elapsed = _drive(url, prefix, n, concurrency)
        cpu = _cpu_seconds(url) - before
    finally:
        client = redis.Redis.from_url(url)
        for key in client.scan_iter(match=f"{prefix}:*", count=1_000):
            client.unlink(key)
        client.close()
    return {"ceiling": n / elapsed, "redis_cpu_us_per_job": cpu / n * 1e6}


class _Pinger(asyncio.Protocol):
    """The least a client can do per round trip: write a packed ``PING``, parse its reply."""

    PING = pack_command(("PING",))

    def __init__(self) -> None:
        self._reader = Reader()
        self._waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while (reply := self._reader.gets()) is not False:
            self._waiting.popleft().set_result(reply)

    def ping(self) -> asyncio.Future[Any]:
        assert self._transport is not None
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        self._transport.write(self.PING)
        return future

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def round_trip(url: str, n: int = 20_000) -> dict[str, float]:
    """``n`` PINGs one after another over a bare connection: how many a second, and the client
    CPU (µs) each costs. No add awaited one at a time can go faster on this machine."""
    address = urllib.parse.urlsplit(url)
    loop = asyncio.get_running_loop()
    _, pinger = await loop.create_connection(_Pinger, address.hostname, address.port)
    try:
        await pinger.ping()
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            await pinger.ping()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        pinger.close()
    return {"round_trips": n / elapsed, "round_trip_cpu_us": cpu / n * 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="jobs per run")
    parser.add_argument("--concurrency", type=int, action="append", help="jobs in flight")
    parser.add_argument("--redis-server", default=None, help="redis-server executable")
    args = parser.parse_args(argv)
    with EmbeddedRedis(executable=args.redis_server,
                       extra_args=["--save", "", "--appendonly", "no"]) as server:  # fmt: skip
        for concurrency in args.concurrency or [10, 50]:
            figures = measure(server.url, args.n, concurrency)
            cpu = figures["redis_cpu_us_per_job"]
            print(f"c={concurrency}: {figures['ceiling']:,.0f} jobs/s, Redis {cpu:.0f} µs CPU "
                  "per job", file=sys.stderr)  # fmt: skip
        floor = asyncio.run(round_trip(server.url, args.n))
        print(f"one at a time: {floor['round_trips']:,.0f} round trips/s, "
              f"{floor['round_trip_cpu_us']:.0f} µs client CPU each", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
