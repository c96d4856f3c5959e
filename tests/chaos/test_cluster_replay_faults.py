"""A bulk replay on Redis Cluster cut short again and again: the replaying process is
SIGKILLed between the two steps of its replays into a queue on another master, and
``settle_dead_letters()`` (what the redrive service runs periodically) finishes them. Each
dead letter is replayed once, runs once, and ends resolved or back in its dead letter."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from lazarus import Job, Queue, _moves

from .dead_letters import DLQ, SOURCE, dead_letter_each
from .harness import Scenario, wait_for
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos

LETTERS = 800
KILLS = 6
SCRIPT = Path(__file__).with_name("replayer.py")
SETTLE_EVERY = 0.5  # seconds between the settle_dead_letters() calls of the "redrive service"


def failing(i: int) -> bool:
    """Whether dead letter ``i`` fails again when replayed (one in five)."""
    return i % 5 == 0


async def on_two_masters(raw: Any, source: Queue, dlq: Queue) -> bool:
    await raw.initialize()
    nodes = {raw.nodes_manager.get_node_from_slot(raw.keyslot(q.keys.wait)).name
             for q in (source, dlq)}  # fmt: skip
    return len(nodes) == 2


async def keep_settling(dlq: Queue, stop: asyncio.Event, tally: Counter[str]) -> None:
    """Settle ``dlq`` every SETTLE_EVERY seconds until ``stop``, as the redrive service does."""
    while not stop.is_set():
        try:
            tally["settled"] += await dlq.settle_dead_letters()
            tally["calls"] += 1
        except Exception as exc:  # counted: a settle must not fail, even mid-replay
            tally[type(exc).__name__] += 1
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), SETTLE_EVERY)


@pytest.mark.timeout(240)
async def test_cluster_bulk_replay_killed_between_its_steps_is_finished_by_settling(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 800 dead letters in "dlq" from "src", a queue on another master (one in five
    # failing again when replayed, the others taking 20 ms), and no worker on "src" yet
    cluster = await asyncio.to_thread(scenario.cluster)
    raw = scenario.raw(cluster)
    source, dlq = scenario.queue(cluster, SOURCE), scenario.queue(cluster, DLQ)
    assert await on_two_masters(raw, source, dlq), "src and dlq must be on two masters"
    payloads = [{"i": i, "ms": 20, **({"fail": 99} if failing(i) else {})}
                for i in range(LETTERS)]  # fmt: skip
    letters = await dead_letter_each(cluster, source, payloads, DLQ)
    processing = dlq.keys.dl_index("s", "processing")
    sweep, swept = _moves.sweep, Counter[str]()

    async def counted_sweep(client: Any, keys: Any, *args: Any, **kwargs: Any) -> int:
        finished = await sweep(client, keys, *args, **kwargs)
        swept[keys.queue] += finished
        return finished

    monkeypatch.setattr(_moves, "sweep", counted_sweep)  # counts the moves settling finished

    # When a process bulk-replays them all (batches of 50) and is SIGKILLed right after a
    # batch's first step, six times, each time replaced; a seventh runs to its end. Meanwhile
    # settle_dead_letters() runs every 0.5 s, as the redrive service would run it
    log = scenario.tmp / "replayer.log"
    err = (scenario.tmp / "replayer.err").open("ab")
    rng = random.Random(31)
    stop, tally = asyncio.Event(), Counter[str]()
    settler = asyncio.create_task(keep_settling(dlq, stop, tally))
    left_by_kills: list[int] = []
    procs: list[asyncio.subprocess.Process] = []
    try:
        for _ in range(KILLS + 1):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, str(SCRIPT), cluster.url, str(log), stderr=err
            )
            procs.append(proc)
            if len(procs) > KILLS:
                break  # the last one runs to its end
            target = min(LETTERS, int(await raw.zcard(processing)) + rng.randint(60, 160))

            async def part_way(target: int = target, proc: Any = proc) -> bool:
                return proc.returncode is not None or await raw.zcard(processing) >= target

            assert await wait_for(part_way, 30), "a replayer made no progress in 30 s"
            if proc.returncode is not None:
                break  # it replayed everything before the kill: the storm is over
            proc.kill()
            await proc.wait()
            left_by_kills.append(int(await raw.hlen(dlq.keys.moves)))
        ended = await asyncio.wait_for(procs[-1].wait(), 60) == 0
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        err.close()
    stop.set()
    await settler
    kills, swept_in_storm = len(left_by_kills), swept[DLQ]

    # And settle_dead_letters() runs until no move is left half-done (a move is finished
    # once it is 2 s old)
    left = int(await raw.hlen(dlq.keys.moves))
    settled_after = 0

    async def no_move_left() -> bool:
        nonlocal settled_after
        settled_after += await dlq.settle_dead_letters()
        return int(await raw.hlen(dlq.keys.moves)) == 0

    finished = await wait_for_every(no_move_left, 15, SETTLE_EVERY)
    waiting = await source.get_job_counts()

    # And three workers drain "src"
    pool = scenario.workers(cluster, SOURCE, dlq=DLQ, concurrency=8, lock_duration=2000,
                            stalled_interval=1000)  # fmt: skip
    for _ in range(3):
        pool.spawn()

    async def drained() -> bool:
        return int(await raw.zcard(processing)) == 0 and await scenario.settle(source, 0)

    done = await wait_for(drained, 45)
    await scenario.stop_workers()
    settled_last = await dlq.settle_dead_letters()

    # Then every dead letter was replayed exactly once and its replay ran once: resolved with
    # one completion, or (one that fails again) back to pending with none; none processing
    # without a job, none lost, no move left half-done, nothing left in "src"
    findings = Findings(
        "cluster: bulk replay SIGKILLed between its steps, settle_dead_letters", LETTERS,
        f"{kills} SIGKILLs of a bulk replayer after a batch's first step; settle_dead_letters "
        "every 0.5 s",
    )  # fmt: skip
    findings.spurious_stalls = None
    runs = RunLog.read(scenario.tmp / f"runs-{SOURCE}")
    found: list[Job | None] = []
    ids = list(letters)
    for start in range(0, len(ids), 16):  # a cluster client has few connections per node
        found += await asyncio.gather(*(dlq.peek_dead_letter(i) for i in ids[start : start + 16]))
    statuses = await judge_replays(findings, letters, found, source, raw, runs)
    findings.half_moved += [f"dlq move {m}" for m in await raw.hkeys(dlq.keys.moves)]
    findings.half_moved += [f"src move {m}" for m in await raw.hkeys(source.keys.moves)]
    findings.undrained += [
        *await raw.lrange(source.keys.wait, 0, -1),
        *await raw.lrange(source.keys.active, 0, -1),
    ]
    findings.broken["settle_dead_letters raised"] = [
        f"{name} x{n}" for name, n in tally.items() if name not in ("settled", "calls")
    ]
    findings.broken["the last replayer did not end"] = [] if ended else ["replayer"]
    findings.broken["moves left half-done by settling"] = [] if finished else [f"{left} moves"]
    findings.broken["other than one job waiting per replay once settled"] = [
        f"{waiting['waiting']} jobs waiting for {LETTERS} replays"
    ] if waiting["waiting"] != LETTERS else []  # fmt: skip
    progress = [line for line in log.read_text().splitlines() if line.startswith("P")]
    findings.notes.append(
        f"moves in the dead letter queue's moves hash after each kill {left_by_kills}, {left} "
        f"when the storm ended; moves finished by settle_dead_letters during the storm "
        f"{swept_in_storm}, after it {swept[DLQ] - swept_in_storm} (none left: {finished}); "
        f"jobs waiting then "
        f"{waiting['waiting']}; settled during the storm {tally['settled']} "
        f"({tally['calls']} calls), after it {settled_after}, after the drain {settled_last}; "
        f"statuses {dict(sorted(statuses.items()))}; batches the replayers reported done "
        f"{len(progress)}; drained: {done}"
    )
    await scenario.finish(findings)
    assert kills >= 3 and max(left_by_kills) > 0, "the kills never cut a replay short"


async def wait_for_every(condition: Any, timeout: float, every: float) -> bool:
    """``wait_for`` at a slower pace: ``condition`` calls settle_dead_letters()."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if await condition():
            return True
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(every)


async def judge_replays(
    findings: Findings, letters: dict[str, int], found: list[Job | None], source: Queue, raw: Any,
    runs: RunLog,
) -> Counter[str]:  # fmt: skip
    """Fill ``findings`` for the dead letters ``letters`` (id -> i): each replayed once (one
    timeline entry into processing), its one job run once; resolved with one completion, or,
    failing by design, pending again with none. Returns the dead letters' statuses."""
    by_id = {letter.id: letter for letter in found if letter is not None}
    jobs: dict[str, list[str]] = defaultdict(list)  # dead letter id -> its replays' job ids
    prefix = source.keys.job_prefix
    ids = [str(k)[len(prefix) :] async for k in raw.scan_iter(match=prefix + "*", count=1000)]
    async with raw.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hget(source.keys.job(job_id), "replayOf")
        for job_id, replay_of in zip(ids, await pipe.execute()):
            jobs[str(replay_of)].append(job_id)
    statuses: Counter[str] = Counter()
    wrong = findings.broken.setdefault("ended other than designed", [])
    for dl_id, i in letters.items():
        letter = by_id.get(dl_id)
        meta = letter.dead_letter if letter is not None else None
        if meta is None:
            findings.lost.append(dl_id)
            continue
        statuses[meta.status] += 1
        replays = sum(1 for change in meta.timeline if change.to == "processing")
        made = set(jobs.get(dl_id, []))  # its jobs still in src, and the one it names last
        if meta.replay_job_id is not None:
            made.add(meta.replay_job_id)
        completions = sum(runs.events.get(j, Counter())["C"] for j in made)
        findings.exec_dups += sum(max(0, runs.count(j) - 1) for j in made)
        if replays > 1 or len(made) > 1 or completions > 1:
            findings.duplicated.append(dl_id)
        elif replays == 0:
            findings.undrained.append(dl_id)
        if meta.status == "processing":
            findings.stuck.append(dl_id)
        wanted = ("pending", 0) if failing(i) else ("resolved", 1)
        if (meta.status, completions) != wanted and meta.status != "processing":
            wrong.append(dl_id)
    return statuses
