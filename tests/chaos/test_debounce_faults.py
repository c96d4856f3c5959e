"""Debounced adds (deduplication with replace) while the workers that run them are SIGKILLed."""

from __future__ import annotations

import asyncio
import random

import pytest

from .harness import Scenario
from .jobs import OK, JobSpec
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos

KEYS, BURST = 300, 4


@pytest.mark.timeout(240)
async def test_debounced_adds_race_a_sigkill_storm(scenario: Scenario) -> None:
    # Given three worker processes, and a producer that adds bursts of four jobs for each of
    # 300 keys, one add at a time, the keys' adds interleaved, each delayed by 0.2-2.5 s with
    # deduplication {"id": key, "replace": True}: an add whose key a job still delayed holds
    # deletes it and takes its place; one whose holder is due already (or running) adds nothing
    server = scenario.redis()
    name = "debounce"
    queue = scenario.queue(server, name)
    pool = scenario.workers(server, name, concurrency=8, lock_duration=2000, stalled_interval=1000)
    for _ in range(3):
        pool.spawn()
    rng = random.Random(19)
    order = [(key, n) for n in range(BURST) for key in rng.sample(range(KEYS), KEYS)]
    added: dict[str, int] = {}  # job id -> key, for every add that added its job
    last: dict[int, str] = {}  # key -> the job of its last add that added one

    async def produce() -> None:
        for key, n in order:
            job_id = f"k{key}-{n}"
            data = {"i": len(added), "ms": rng.randint(5, 20)}
            job = await queue.add("debounced", data, job_id=job_id, delay=rng.randint(200, 2500),
                                  deduplication={"id": f"key-{key}", "replace": True})  # fmt: skip
            if job.id == job_id:
                added[job_id] = key
                last[key] = job_id
            await asyncio.sleep(rng.random() * 0.008)  # the producer's own pace

    # When a worker is SIGKILLed and replaced every 300 ms while the producer adds (4-5 s)
    producing = asyncio.create_task(produce())
    while not producing.done():
        await asyncio.wait({producing}, timeout=0.3)  # the storm's own pace
        pool.kill(rng.choice(pool.live))
        pool.spawn()
    await producing

    # Then every job added and not replaced ran as without faults; no replaced job ran or is
    # left anywhere; and the last job added for each key ran
    drained = await scenario.settle(queue, timeout=60)
    raw = scenario.raw(server)
    events = await raw.xrange(queue.keys.events, count=1)
    replaced = {f["jobId"] for _, f in await raw.xrange(queue.keys.events)
                if f["event"] == "removed"}  # fmt: skip
    specs = [JobSpec(i, OK, {}, 1) for i in added if i not in replaced]
    findings = Findings(
        "debounced adds (deduplication replace), worker SIGKILL storm", len(added),
        f"{len(order)} adds of {KEYS} keys; {pool.killed} SIGKILLs of 3 workers, 1 per 300 ms",
    )  # fmt: skip
    await scenario.audit(findings, server, name, specs, healthy=None)
    runs = RunLog.read(scenario.tmp / f"runs-{name}")
    findings.broken["replaced, yet ran"] = [i for i in replaced if runs.count(i)]
    findings.broken["replaced, yet still there"] = [
        i for i in replaced if await raw.exists(queue.keys.job(i))
    ]
    findings.broken["replaced, never added"] = [i for i in replaced if i not in added]
    findings.broken["last add of a key replaced"] = [i for i in last.values() if i in replaced]
    first, first_id = events[0][1] if events else {}, "k{}-{}".format(*order[0])
    findings.broken["events trimmed: replacements unknown"] = (
        [] if (first.get("jobId"), first.get("event")) == (first_id, "delayed") else ["trimmed"]
    )
    findings.notes.append(
        f"{len(added)} jobs added, {len(replaced)} replaced, {len(order) - len(added)} adds "
        f"deduplicated onto a holder no longer delayed; drained: {drained}"
    )
    await scenario.finish(findings)
