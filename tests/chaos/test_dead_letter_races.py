"""Races on dead letters: many clients replaying one dead letter at once, filtered bulk
replay against filtered purge over the same dead letters, a whole-store purge that dies
half-way while a filtered purge races it, and replay while Redis refuses writes for want of
memory."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from typing import Any

import pytest

from lazarus import DeadLetterFilter, JobStateError, Queue
from lazarus.dead_letter import detach

from .audit import all_dead_letters
from .dead_letters import DLQ, Where, dead_letter_each, judge_letters, make_dead_letters
from .harness import Scenario, sweep_when_lapsed, wait_for
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos

CLIENTS = 20


async def replay_at(gate: asyncio.Event, client: Queue, letter_id: str) -> Any:
    """Replay ``letter_id`` once ``gate`` opens: the new job's id, ``None`` when another
    client was first (the one right answer for the others), or the unexpected error."""
    await gate.wait()
    try:
        return await client.replay_dead_letter(letter_id)
    except JobStateError:  # replayed already: processing
        return None
    except Exception as exc:
        return exc


@pytest.mark.timeout(180)
async def test_twenty_clients_replay_one_dead_letter(scenario: Scenario) -> None:
    # Given 100 dead letters and 20 clients, each with a connection of its own
    server = scenario.redis()
    await make_dead_letters(server, [(i, "race", "ValueError") for i in range(100)])
    clients = [scenario.queue(server, DLQ) for _ in range(CLIENTS)]
    await asyncio.gather(*(c.get_dead_letter_count() for c in clients))  # connect them all
    letters = await all_dead_letters(clients[0])

    # When all 20 replay the same dead letter at the same moment, for each dead letter
    replayed: Counter[int] = Counter()
    unexpected: list[str] = []
    for letter in letters:
        go = asyncio.Event()
        calls = [asyncio.create_task(replay_at(go, c, letter.id)) for c in clients]
        await asyncio.sleep(0)  # every call waits at the gate
        go.set()
        results = await asyncio.gather(*calls)
        replayed[letter.original_data["i"]] += sum(isinstance(r, str) for r in results)
        unexpected += [repr(r) for r in results if isinstance(r, Exception)]

    # Then exactly one replay of each succeeded and made exactly one job
    findings = Findings("20 clients replay one dead letter", len(letters),
                        f"{CLIENTS} concurrent replays x {len(letters)} dead letters")  # fmt: skip
    findings.spurious_stalls = None
    judge_letters(findings, await Where.look(server), dict.fromkeys(range(100), "replay"),
                  replayed)  # fmt: skip
    findings.broken["replay raised other than JobStateError"] = unexpected
    findings.notes.append(f"successful replays: {sum(replayed.values())}")
    await scenario.finish(findings)


REPLAY_FILTER = DeadLetterFilter(error_type="ValueError")
PURGE_FILTER = DeadLetterFilter(name_prefix="race-")


def fate(name: str, error: str) -> str:
    """What the two filters make of a dead letter."""
    replay, purge = error == "ValueError", name.startswith("race-")
    return {(True, True): "either", (True, False): "replay", (False, True): "purge"}.get(
        (replay, purge), "keep"
    )


@pytest.mark.timeout(180)
async def test_filtered_bulk_replay_races_filtered_purge(scenario: Scenario) -> None:
    # Given 3,000 dead letters of three names and two error types, and 500 more on the way
    # (TimeoutErrors, which no replay takes back to the queue their worker consumes)
    server = scenario.redis()
    rng = random.Random(7)
    made = [(i, rng.choice(["race-a", "race-b", "other"]),
             rng.choice(["ValueError", "TimeoutError"]) if i < 3000 else "TimeoutError")
            for i in range(3500)]  # fmt: skip
    await make_dead_letters(server, made[:3000])
    replayers = [scenario.queue(server, DLQ) for _ in range(2)]
    purgers = [scenario.queue(server, DLQ) for _ in range(2)]

    # When two clients replay every ValueError and two others purge every "race-*" dead
    # letter, one of each in batches of 50 and one in batches of 1,000 (which each script
    # call's time budget splits into many calls), all at once, while the 500 others are
    # dead-lettered
    sizes = (50, 1000)
    results = await asyncio.gather(
        *(q.replay_all_dead_letters(REPLAY_FILTER, batch_size=b) for q, b in zip(replayers, sizes)),
        *(q.purge_dead_letters(PURGE_FILTER, batch_size=b) for q, b in zip(purgers, sizes)),
        make_dead_letters(server, made[3000:], source_name="late"),
    )
    replay_total, purge_total = sum(results[:2]), sum(results[2:4])

    # Then every match was replayed or purged exactly once, none skipped, none twice, and
    # nothing else touched
    where = await Where.look(server)
    tags = {i: fate(name, error) + ("?" if i >= 3000 else "") for i, name, error in made}
    findings = Findings("filtered bulk replay vs filtered purge", len(made),
                        "2 bulk replays and 2 bulk purges at once, batches of 50 and "
                        "1,000 (split by the call budget), 500 dead letters arriving")  # fmt: skip
    findings.spurious_stalls = None
    judge_letters(findings, where, tags, Counter({i: where.jobs[i] for i in tags}))
    purged = sum(1 for i in tags if not where.letters[i] and not where.jobs[i])
    jobs = sum(where.jobs.values())
    if replay_total != jobs or purge_total != purged:
        findings.broken["counts returned other than what happened"] = [
            f"replayed {replay_total} (jobs made {jobs}), purged {purge_total} (gone {purged})"
        ]
    findings.notes.append(f"replayed {replay_total}, purged {purge_total}, left "
                          f"{sum(where.letters.values())}")  # fmt: skip
    await scenario.finish(findings)


async def some_arrived(dlq: Queue, count: int) -> bool:
    return await dlq.get_dead_letter_count() >= count


class Died(Exception):
    """Raised by a progress callback: the purging process dies there."""


@pytest.mark.timeout(180)
async def test_whole_store_purge_dies_half_way_while_a_filtered_purge_races_it(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 3,000 dead letters of three names, and 500 more on the way
    server = scenario.redis()
    rng = random.Random(11)
    made = [(i, rng.choice(["race-a", "race-b", "other"]),
             rng.choice(["ValueError", "TimeoutError"])) for i in range(3500)]  # fmt: skip
    await make_dead_letters(server, made[:3000])
    whole, rival, pruner = (scenario.queue(server, DLQ) for _ in range(3))
    monkeypatch.setattr(detach, "DROP_MOST", 200)
    detached_first: list[bool] = []

    async def die_half_way(done: int) -> None:
        if not detached_first:  # the store was emptied before the first deletion
            detached_first.append(bool(await pruner.client.smembers(pruner.keys.dl_detached)))
        if done >= 1000:
            raise Died

    # When the 500 are being dead-lettered (50 at a time), another client purges every
    # "race-*" dead letter in batches of 50, and from its first batch on one client purges the
    # whole store and dies after about 1,000 deletions; and a minute later the pruning runs
    async def arrive() -> None:  # 50 at a time, each batch by a worker of its own
        for first in range(3000, 3500, 50):
            await make_dead_letters(server, made[first : first + 50], source_name="late")

    arriving = asyncio.ensure_future(arrive())
    first_batch = asyncio.Event()
    await wait_for(lambda: some_arrived(pruner, 3050), 60)
    rival_purge = asyncio.ensure_future(rival.purge_dead_letters(
        PURGE_FILTER, batch_size=50, on_progress=lambda done: first_batch.set()))  # fmt: skip
    await first_batch.wait()
    results = await asyncio.gather(
        whole.purge_dead_letters(on_progress=die_half_way), rival_purge, arriving,
        return_exceptions=True,
    )  # fmt: skip
    raw = scenario.raw(server)
    left_detached = sum([await raw.zcard(k) for k in await raw.smembers(whole.keys.dl_detached)])
    monkeypatch.setattr(detach, "LEFTOVER_AGE_MS", 0)  # a minute later
    await pruner.prune_dead_letters()

    # Then each of the 3,000 was purged exactly once, whoever reached it, and the late ones
    # were purged or stayed; no hash is left outside the store, and the purges counted each
    # dead letter once
    where = await Where.look(server)
    tags = {i: "purge" + ("?" if i >= 3000 else "") for i, _, _ in made}
    findings = Findings("whole-store purge dies half-way, filtered purge races it", len(made),
                        "whole-store purge stopped after ~1,000 deletions, a filtered purge "
                        "(batches of 50) and 500 arrivals at once, then pruning")  # fmt: skip
    findings.spurious_stalls = None
    judge_letters(findings, where, tags, Counter())
    hashes = [k async for k in raw.scan_iter(match=whole.keys.job("*"), count=1000)]
    gone = sum(1 for i in tags if not where.letters[i])
    counted = int(await raw.hget(whole.keys.meta, "count:purged") or 0)
    unexpected = [
        repr(r) for r in results[:2] if isinstance(r, Exception) and not isinstance(r, Died)
    ]
    findings.broken["purge raised other than the death"] = unexpected
    findings.broken["the whole-store purge did not detach the store"] = (
        [] if detached_first == [True] and isinstance(results[0], Died) else [str(results[0])]
    )
    findings.broken["hashes outside the store"] = (
        [] if len(hashes) == sum(where.letters.values()) else [f"{len(hashes)} hashes"]
    )
    findings.broken["purges counted other than what went"] = (
        [] if counted == gone else [f"counted {counted}, gone {gone}"]
    )
    findings.notes.append(f"the rival purged {results[1]}; {left_detached} detached dead letters "
                          f"left by the dead purge, dropped by the pruning; "
                          f"{sum(where.letters.values())} stayed")  # fmt: skip
    await scenario.finish(findings)


@pytest.mark.timeout(180)
async def test_replay_under_memory_pressure(scenario: Scenario) -> None:
    # Given 40 dead letters
    server = scenario.redis()
    await make_dead_letters(server, [(i, "pressed", "ValueError") for i in range(40)])
    dlq = scenario.queue(server, DLQ)
    letters = await all_dead_letters(dlq)

    # When each is replayed once while maxmemory is at half the used memory (noeviction)
    control = scenario.raw(server)
    used = int((await control.info("memory"))["used_memory"])
    await control.config_set("maxmemory", used // 2)
    replayed: Counter[int] = Counter()
    raised: Counter[str] = Counter()
    try:
        for letter in letters:
            try:
                await dlq.replay_dead_letter(letter.id)
                replayed[letter.original_data["i"]] += 1
            except Exception as exc:
                raised[type(exc).__name__] += 1
    finally:
        await control.config_set("maxmemory", 0)

    # Then a replay that raised did not happen, and one that returned did, exactly once:
    # a dead letter refused stays, whole, to be replayed later
    findings = Findings("replay under memory pressure", len(letters),
                        "maxmemory at half the used memory (noeviction)")  # fmt: skip
    findings.spurious_stalls = None
    tags = {letter.original_data["i"]: "replay?" for letter in letters}
    judge_letters(findings, await Where.look(server), tags, replayed)
    findings.notes.append(f"replays that returned: {sum(replayed.values())}; that raised: "
                          f"{dict(raised)}")  # fmt: skip
    await scenario.finish(findings)


@pytest.mark.timeout(240)
async def test_dead_letter_queue_workers_killed_and_stopped_lose_and_double_nothing(
    scenario: Scenario,
) -> None:
    # Given 600 dead letters, one in five of which never ends when run again, and four worker
    # processes on the dead letter queue (whose own dead letter queue is "dlq2"), with 1 s
    # leases and one stall allowed
    server = scenario.redis()
    source = scenario.queue(server, "src")
    tags = await dead_letter_each(
        server, source, [{"i": i, "ms": 20, "hang": i % 5 == 0} for i in range(600)], DLQ
    )
    dlq = scenario.queue(server, DLQ)
    pool = scenario.workers(server, DLQ, dlq="dlq2", concurrency=8, lock_duration=1000,
                            stalled_interval=500, max_stalled_count=1,
                            shutdown_timeout=0.2)  # fmt: skip
    for _ in range(4):
        pool.spawn()

    # When, every 250 ms for 10 s, a worker is SIGKILLed (its dead letters stall and the sweep
    # puts them back into the store) or, one time in three, SIGTERMed (it hands back what it
    # runs and holds), and replaced
    rng = random.Random(11)
    stopped = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)  # the storm's own pace
        pid = rng.choice(pool.live)
        if rng.random() < 1 / 3:
            pool.signal(pid, signal.SIGTERM)
            pool.live.remove(pid)
            stopped += 1
        else:
            pool.kill(pid)
        pool.spawn()

    # Then, once the workers left standing have finished what ends, every dead letter is in
    # exactly one place (completed by a worker, pending in the store, or a dead letter of
    # "dlq2" after its second stall), none completed twice, none in the queue's wait or
    # active list, and every one that ends is completed or stalled twice
    raw = scenario.raw(server)
    last = scenario.queue(server, "dlq2")
    ending = {i for i, tag in tags.items() if tag % 5}

    async def moved_on() -> set[str]:
        out = {str(i) for i in await raw.zrange(dlq.keys.completed, 0, -1)}
        for letter in await all_dead_letters(last):
            assert letter.dead_letter is not None
            out.add(letter.dead_letter.original_job_id)
        return out

    async def ended() -> bool:
        return ending <= await moved_on()

    drained = await wait_for(ended, 45)
    await scenario.stop_workers()
    # The dead letters that workers killed last still held wait for the next worker's sweep
    # (their leases run 1 s): that sweep, run here once the leases have lapsed
    await sweep_when_lapsed(raw, dlq.keys, last.keys)
    completed = set(await raw.zrange(dlq.keys.completed, 0, -1))
    places: Counter[str] = Counter(completed)
    for letter in await all_dead_letters(dlq):
        places[letter.id] += 1
    moved = await all_dead_letters(last)
    for letter in moved:
        assert letter.dead_letter is not None
        places[letter.dead_letter.original_job_id] += 1
    findings = Findings("dead letter queue workers killed and stopped", len(tags),
                        f"{pool.killed} SIGKILLs and {stopped} SIGTERMs of 4 workers of the "
                        "dead letter queue, 1 per 250 ms")  # fmt: skip
    findings.spurious_stalls = None
    findings.lost = sorted(i for i in tags if places[i] == 0)
    findings.duplicated = sorted(i for i in tags if places[i] > 1)
    runs = RunLog.read(scenario.tmp / f"runs-{DLQ}")
    findings.broken["completed twice"] = sorted(
        i for i in tags if runs.events.get(i, Counter())["C"] > 1
    )
    findings.broken["left in the wait or active list"] = [
        *await raw.lrange(dlq.keys.wait, 0, -1),
        *await raw.lrange(dlq.keys.active, 0, -1),
    ]
    findings.broken["dead letters that end, neither completed nor stalled twice"] = sorted(
        ending - await moved_on()
    )
    findings.notes.append(
        f"completed {len(completed)}, pending "
        f"{await dlq.count_dead_letters()}, moved to dlq2 (stalled twice) {len(moved)};"
        f" drained: {drained}"
    )
    await scenario.finish(findings)
