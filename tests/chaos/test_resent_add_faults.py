"""A lost reply of an add: the add ran, the job ran and was deleted, then the re-send came.

The client chooses a job's id before it sends the add, so an add whose reply a dropped
connection lost is sent again (``add_jobs`` is in ``_scripts.REPEATABLE``) and the re-send
finds the job there: it answers JOB_EXISTS and adds nothing. Unless the job is no longer
there: added by the first send, run at once and deleted (``remove_on_complete=True``, or
failed for good into a dead letter queue, which deletes the source job's hash) before the
re-send arrived. Then the re-send adds the job a second time, and it runs (or is
dead-lettered) twice.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable

import pytest
from redis.exceptions import RedisError

from lazarus import LazarusError, Queue, _scripts
from lazarus._keys import QueueKeys

from ..faults import script_ready
from .audit import all_dead_letters
from .harness import PREFIX, Scenario
from .jobs import DOOMED, OK, JobSpec
from .lossy_proxy import LossyProxy
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos

NAME = "resent"
JOBS = 2000
DROP_RATE = 1 / 12  # of the add calls, their reply lost
HOLD = (0.02, 0.08)  # seconds from the add reaching Redis to the connection's cut


def resent_add_mix(count: int, *, seed: int) -> list[JobSpec]:
    """``count`` jobs that run at once: seven in ten succeed and are removed on completion,
    three in twenty fail for good on their only attempt (into the dead letter queue, which
    deletes the source job), three in twenty succeed and keep everything (the control group:
    a re-send finds them)."""
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        draw = rng.random()
        if draw < 0.7:
            spec = JobSpec(f"r{i}", OK, {"i": i}, 1, {"remove_on_complete": True})
        elif draw < 0.85:
            spec = JobSpec(f"f{i}", DOOMED, {"i": i, "fail": 99, "error": "ValueError"}, 1)
        else:
            spec = JobSpec(f"k{i}", OK, {"i": i}, 1)
        specs.append(spec)
    return specs


def add_job_ids(keys: QueueKeys) -> Callable[[list[bytes]], list[str]]:
    """The ids of the jobs an ``add_jobs`` call (FCALL or EVALSHA) adds: its keys from the
    eleventh on are the jobs' hashes (see the script's header)."""
    prefix = keys.job_prefix.encode()

    def job_ids(command: list[bytes]) -> list[str]:
        numkeys = int(command[2])
        hashes = command[3 + 10 : 3 + numkeys]
        assert all(h.startswith(prefix) for h in hashes), hashes[:2]
        return [h[len(prefix) :].decode() for h in hashes]

    return job_ids


async def produce_in_groups(queue: Queue, specs: list[JobSpec], *, seed: int) -> int:
    """Add ``specs`` one by one and in small concurrent groups of single adds (each with its
    ``job_id``) and small bulks; a call that still fails after the client's own retries is
    sent again as it was. Returns how many calls failed so."""
    rng = random.Random(seed)
    failures = 0

    async def call(batch: list[JobSpec], bulk: bool) -> None:
        nonlocal failures
        for _ in range(20):
            try:
                if bulk:
                    await queue.add_bulk([s.add_args() for s in batch])
                else:
                    await queue.add(**batch[0].add_args())
                return
            except (LazarusError, RedisError, OSError):
                failures += 1
                await asyncio.sleep(0.05)  # the producer's own backoff
        raise AssertionError(f"add of {[s.id for s in batch]} refused 20 times")

    rest = list(specs)
    while rest:
        calls: list[tuple[list[JobSpec], bool]] = []
        for _ in range(1 if rng.random() < 0.3 else rng.randint(2, 5)):
            if not rest:
                break
            size = 1 if rng.random() < 0.6 else rng.randint(2, 6)
            batch, rest = rest[:size], rest[size:]
            calls.append((batch, size > 1 or rng.random() < 0.2))
        await asyncio.gather(*(call(batch, bulk) for batch, bulk in calls))
    return failures


@pytest.mark.timeout(120)
async def test_resent_adds_of_jobs_run_and_deleted_meanwhile(scenario: Scenario) -> None:
    # Given three worker processes running no-op jobs at once, with a dead letter queue, and a
    # producer whose connection goes through a proxy that, for about one add call in twelve,
    # lets the call run in Redis, withholds its reply and cuts the connection 20-80 ms later
    # (so that the client sends the add again, 40 ms after the cut)
    server = scenario.redis()
    keys = QueueKeys(PREFIX, NAME)
    specs = resent_add_mix(JOBS, seed=13)
    pool = scenario.workers(server, NAME, concurrency=8, lock_duration=5000, stalled_interval=1000)
    for _ in range(3):
        pool.spawn()
    add_jobs = _scripts.load("add_jobs")
    # Loaded beforehand: a call refused for want of it did not run, and its second send
    # (after the load) is no re-send of an add that ran.
    marker = await script_ready(scenario.raw(server), add_jobs)
    proxy = LossyProxy(
        server.url, marker=marker, job_ids=add_job_ids(keys), rate=DROP_RATE, hold=HOLD,
        seed=13,
    )  # fmt: skip

    # When it adds 2,000 jobs: most removed on completion, some failing for good on their
    # only attempt into the dead letter queue, some keeping everything
    async with proxy:
        queue = Queue(NAME, connection=proxy.url, prefix=PREFIX)
        started = time.monotonic()
        try:
            refused = await produce_in_groups(queue, specs, seed=13)
        finally:
            await queue.close()
        producing = time.monotonic() - started

    # Then, once the queue has drained, every job ran exactly once: none run twice, none
    # dead-lettered twice, none lost, nothing left waiting or active
    drained = await scenario.settle(scenario.queue(server, NAME), timeout=30)
    await scenario.stop_workers()  # every callback's line written
    findings = Findings(
        "re-sent adds of jobs run and deleted meanwhile", len(specs),
        f"{proxy.drops} connections cut 20-80 ms after an add ran ({proxy.dropped_calls} of "
        f"{proxy.calls} add calls lost their reply)",
    )  # fmt: skip
    await scenario.audit(findings, server, NAME, specs, healthy=lambda _: True)
    runs = RunLog.read(scenario.tmp / f"runs-{NAME}")
    removed = {s.id for s in specs if s.options.get("remove_on_complete")}
    # A job removed on completion is nowhere by design: lost only if it never completed.
    findings.lost = [
        i for i in findings.lost if not (i in removed and runs.events.get(i, Counter())["C"])
    ]
    twice = [s.id for s in specs if runs.count(s.id) > 1]
    findings.broken["ran more than once"] = twice
    dlq = scenario.queue(server, "dlq")
    failing = [s for s in specs if s.kind == DOOMED]
    findings.broken["failing job without a dead letter found by its original id"] = [
        s.id
        for s in failing
        if (letter := await dlq.find_dead_letter_by_original_id(s.id)) is None
        or letter.dead_letter is None
        or letter.dead_letter.original_job_id != s.id
    ]
    findings.broken["proxy errors"] = proxy.errors

    dropped = set(proxy.dropped_ids)
    resent = {i for i, n in proxy.sent.items() if n > 1}
    groups = {"removed on completion": removed, "dead-lettered": {s.id for s in failing}}
    groups["kept (control)"] = {s.id for s in specs} - removed - groups["dead-lettered"]
    per_group = "; ".join(
        f"{group}: {len(dropped & ids)} dropped, {len(resent & ids)} re-sent, "
        f"{sum(1 for i in ids if runs.count(i) > 1)} ran twice"
        for group, ids in groups.items()
    )
    letters = Counter(
        letter.dead_letter.original_job_id
        for letter in await all_dead_letters(dlq)
        if letter.dead_letter is not None
    )
    findings.notes.append(
        f"add calls {proxy.calls} (of which re-sent {proxy.resent_calls}) on "
        f"{proxy.connections} connections; adds whose reply was dropped: {proxy.dropped_calls} "
        f"calls, {len(dropped)} jobs; jobs re-sent: {len(resent)}; calls refused after the "
        f"client's retries: {refused}; produced in {producing:.1f} s; drained: {drained}"
    )
    findings.notes.append(per_group)
    most = max(runs.count(s.id) for s in specs)
    findings.notes.append(
        f"jobs run twice or more: {len(twice)} (at most {most} runs of one job); dead letters "
        f"{sum(letters.values())} for {len(failing)} failing jobs (dead-lettered twice or "
        f"more: {sum(1 for n in letters.values() if n > 1)}); lost: {len(findings.lost)}; ran "
        f"more than once without a re-send: {len(set(twice) - resent)}"
    )
    await scenario.finish(findings)
