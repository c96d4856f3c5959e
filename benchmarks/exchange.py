"""What one round trip costs the client, by the path it takes.

Every script call of lazarus is one exchange on a pooled connection (``_scripts/_wire.py``):
its commands written in one go, its replies read in order. This measures, for ``PING`` after
``PING`` on one private Redis, the client CPU (µs) and the wall time (µs) of a round trip:

- ``floor``: a bare asyncio connection, hiredis parsing (``ceiling.round_trip``); no client
  can do less;
- ``lazarus``: lazarus's exchange, reading off the connection's hiredis reader, one deadline
  timer for every exchange;
- ``redis-py``: the same exchange through redis-py's ``send_packed_command`` and
  ``read_response`` (what a connection without hiredis takes, and what every call took
  before);
- ``execute``: ``_scripts.execute``, the exchange with its pooled connection and retry policy
  around it, as every script call goes;
- ``add``: ``Queue.add`` of the suite's ~100-byte payload (``workloads.payload``), a whole
  add: what it costs above ``execute`` is the add's own work on the client (checking the
  job, encoding it, the script call, the job it returns).

The paths take turns, ``--rounds`` times ``--n`` round trips each, and the medians are
printed: this machine's speed drifts over minutes, so alternating keeps them comparable.

Usage::

    python benchmarks/exchange.py [--n 5000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import ceiling
from hiredis import pack_command
from workloads import payload

from lazarus import Queue, _scripts
from lazarus._connection import connect
from lazarus._scripts import _wire
from lazarus.embedded import EmbeddedRedis

PING = pack_command(("PING",))


async def _measure(url: str, n: int, rounds: int) -> dict[str, tuple[float, float]]:
    client: Any = connect(url)
    conn = await client.connection_pool.get_connection()
    limit = conn.socket_timeout
    queue = Queue("exchange", connection=client)
    paths: dict[str, Callable[[], Awaitable[Any]]] = {
        "lazarus": lambda: _wire._exchange(conn, [PING], 1, limit),
        "redis-py": lambda: _wire._exchange_by_redis_py(conn, [PING], 1, limit),
        "execute": lambda: _scripts.execute(client, [("PING",)]),
        "add": lambda: queue.add("job", payload(0)),
    }
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in ("floor", *paths)}
    try:
        for _ in range(rounds):
            floor = await ceiling.round_trip(url, n)
            seen["floor"].append((floor["round_trip_cpu_us"], 1e6 / floor["round_trips"]))
            for name, call in paths.items():
                started, cpu = time.perf_counter(), time.process_time()
                for _ in range(n):
                    await call()
                elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
                seen[name].append((cpu / n * 1e6, elapsed / n * 1e6))
    finally:
        await queue.close()
        await client.connection_pool.release(conn)
        await client.aclose()
    return {
        name: (statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs))
        for name, runs in seen.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5_000, help="round trips per path and round")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of every path")
    parser.add_argument("--redis-server", default=None, help="redis-server executable")
    args = parser.parse_args(argv)
    with EmbeddedRedis(executable=args.redis_server,
                       extra_args=["--save", "", "--appendonly", "no"]) as server:  # fmt: skip
        figures = asyncio.run(_measure(server.url, args.n, args.rounds))
    print(f"{'path':10} {'client CPU µs':>14} {'wall µs':>8}   (medians of {args.rounds} rounds)")
    for name, (cpu, wall) in figures.items():
        print(f"{name:10} {cpu:14.1f} {wall:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
