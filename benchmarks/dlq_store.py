"""Filling, sizing and emptying the store for ``dlq_scale.py``: the load in the 0.1 layout and
its migration, memory per dead letter, and bulk replay and purge of the whole store."""

from __future__ import annotations

import asyncio

import dlq_data
from dlq_data import DLQ, PREFIX, SOURCES
from dlq_measure import measure
from dlq_probe import PauseProbe
from dlq_report import Row, Target
from redis.asyncio import Redis

from lazarus import Queue

# Redis memory per dead letter before the store had indexes (benchmarks/results/results.md,
# the memory row at 913db79: hash, waiting list and event streams); the indexes may add 25 %.
BEFORE_BYTES = 2967
INDEX_SHARE = 0.25
REPLAY_PER_S = 30_000
PURGE_PER_S = 70_000
HASH_SAMPLE = 1000


async def used_memory(client: Redis) -> int:
    return int((await client.info("memory"))["used_memory"])


async def fill(url: str, client: Redis, queue: Queue, probe: PauseProbe, n: int,
               label: str = "") -> tuple[list[Row], dict[str, int]]:  # fmt: skip
    """Write ``n`` dead letters in the 0.1 layout and migrate them; rows for the migration and
    ``used_memory`` before, after the load and after the migration."""
    memory = {"empty": await used_memory(client)}
    async with probe.phase(f"load in the 0.1 layout{label} (set-up)", judged=False):
        seconds = await asyncio.to_thread(dlq_data.write_legacy, url, n)
    memory["legacy"] = await used_memory(client)
    async with probe.phase(f"migrate_dead_letters{label}"):
        sample = await measure(probe, [queue.migrate_dead_letters])
    moved = sample.results[0]
    memory["store"] = await used_memory(client)
    count = await queue.get_dead_letter_count()
    if moved != n or count != n:
        raise RuntimeError(f"migrated {moved:,} and counted {count:,} dead letters, not {n:,}")
    rows = [
        Row(f"load{label}", f"load in the 0.1 layout (pipelined HSET + LPUSH){label}", "/s",
            n / seconds, note=f"{seconds:.1f} s; set-up, not lazarus"),
        sample.throughput(f"migrate{label}", f"migrate_dead_letters (the upgrade path){label}",
                          n, None),
    ]  # fmt: skip
    return rows, memory


async def key_memory(client: Redis, pattern: str) -> dict[str, int]:
    """``MEMORY USAGE ... SAMPLES 0`` of every key matching ``pattern``, by key."""
    sizes = {}
    async for key in client.scan_iter(match=pattern, count=1000):
        sizes[key.decode()] = int(await client.memory_usage(key, samples=0) or 0)
    return sizes


async def memory_rows(client: Redis, queue: Queue, probe: PauseProbe, n: int,
                      memory: dict[str, int]) -> tuple[list[Row], list[str]]:  # fmt: skip
    """Memory per dead letter: in all, of one dead letter hash, and of the store's keys."""
    dl = queue.keys.dl
    async with probe.phase("memory: MEMORY USAGE of every store key (set-up)", judged=False):
        index = await key_memory(client, dl.replace("[", "\\[") + "*")
        sample = await client.zrandmember(queue.keys.dl_index("s", "pending"), HASH_SAMPLE)
        hashes = [int(await client.memory_usage(queue.keys.job(i.decode()), samples=0) or 0)
                  for i in sample]  # fmt: skip
    per_hash = sum(hashes) / len(hashes)
    per_index = sum(index.values()) / n
    limit = BEFORE_BYTES * INDEX_SHARE
    rows = [
        Row("mem.legacy", "used_memory per dead letter, 0.1 layout (hash + waiting list)", "B",
            (memory["legacy"] - memory["empty"]) / n),
        Row("mem.store", "used_memory per dead letter, migrated (hash + store indexes)", "B",
            (memory["store"] - memory["empty"]) / n),
        Row("mem.hash", f"one dead letter hash, MEMORY USAGE (mean of {len(hashes):,})", "B",
            per_hash),
        Row("mem.index", f"store keys (dl:*) per dead letter, ≤ 25 % of {BEFORE_BYTES:,} B",
            "B", per_index, Target("<=", limit)),
        Row("mem.ratio", "store keys ÷ one dead letter hash", "ratio", per_index / per_hash),
    ]  # fmt: skip
    return rows, [_breakdown(index, dl, n)]


def _breakdown(sizes: dict[str, int], dl: str, n: int) -> str:
    groups: dict[str, int] = {}
    for key, size in sizes.items():
        part = key[len(dl) :]
        kind = "i:*" if part.startswith("i:") else "v:*" if part.startswith("v:") else part
        groups[kind] = groups.get(kind, 0) + size
    shown = ", ".join(f"{k} {v / n:,.0f} B" for k, v in sorted(groups.items()))
    return f"store keys per dead letter: {shown} ({len(sizes)} keys)"


async def replay_all(client: Redis, queue: Queue, probe: PauseProbe, n: int) -> Row:
    """replay_all_dead_letters over the whole store; checks the source queues got them all."""
    async with probe.phase("replay_all_dead_letters, whole store"):
        sample = await measure(probe, [queue.replay_all_dead_letters])
    done = sample.results[0]
    waiting = 0
    for source in SOURCES:
        waiting += int(await client.llen(f"{PREFIX}:{{{source}}}:wait"))
    if done != n or waiting != n or await queue.get_dead_letter_count() != 0:
        raise RuntimeError(f"replayed {done:,}, {waiting:,} waiting in the sources, not {n:,}")
    return sample.throughput("replay", "replay_all_dead_letters, whole store", n, REPLAY_PER_S)


async def purge_all(client: Redis, queue: Queue, probe: PauseProbe, n: int) -> Row:
    """purge_dead_letters over the whole store; checks nothing of the store is left."""
    async with probe.phase("purge_dead_letters, whole store"):
        sample = await measure(probe, [queue.purge_dead_letters])
    done = sample.results[0]
    left = [k async for k in client.scan_iter(match=f"{PREFIX}:{{{DLQ}}}:job:*", count=1000)]
    if done != n or left or await queue.get_dead_letter_count() != 0:
        raise RuntimeError(f"purged {done:,} of {n:,}; {len(left):,} hashes left")
    return sample.throughput("purge", "purge_dead_letters, whole store", n, PURGE_PER_S)


async def flush(client: Redis, probe: PauseProbe) -> None:
    """Drop everything (the replayed jobs included) before the store is filled again."""
    async with probe.phase("FLUSHALL (set-up)", judged=False):
        await client.flushall()
