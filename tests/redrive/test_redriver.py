"""The redriver against a real Redis: strategies, claims, loop guard, outcomes, upkeep."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import redis.asyncio as aioredis

from lazarus import DeadLetterFilter, Job, Queue, Worker
from lazarus.dead_letter import RetentionPolicy
from lazarus.redrive import Alert, AlertRule, Redriver, RedriveRule, RulesFile

from ..conftest import wait_until
from .conftest import MakeDeadLetters

MakeRedriver = Callable[..., Redriver]
MINUTE = 60_000


class Clock:
    """A clock the test moves by hand (ms)."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


async def test_backoff_replays_once_its_schedule_has_passed(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver
) -> None:
    (dl_id,) = await make_dead_letters(1)
    arrived = (await dlq.get_dead_letter_jobs())[0].timestamp
    clock = Clock(arrived + MINUTE - 1)
    redriver = make_redriver([RedriveRule(strategy="backoff", schedule=[MINUTE])], clock=clock)

    await redriver.run_once()
    assert await dlq.get_dead_letter_count() == 1 and await queue.get_waiting_count() == 0

    clock.now = arrived + MINUTE
    await redriver.run_once()

    assert redriver.stats.replayed == 1
    (replayed,) = await queue.get_waiting()
    replay_of = await queue.client.hget(queue.keys.job(replayed.id), "replayOf")
    assert replay_of in (dl_id, dl_id.encode())


async def test_the_default_rule_flags_manual_and_raises_an_alert(
    dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver,
    raw: aioredis.Redis,
) -> None:  # fmt: skip
    (dl_id,) = await make_dead_letters(1)
    alerts: list[Alert] = []
    redriver = make_redriver(
        [RedriveRule(DeadLetterFilter(name="other"), schedule=[0])], on_alert=alerts.append
    )

    await redriver.run_once()

    job = await dlq.peek_dead_letter(dl_id)
    assert job is not None and job.dead_letter is not None
    assert job.dead_letter.status == "manual"
    assert job.dead_letter.timeline[-1].actor == "redriver"
    assert [(a.name, a.dead_letter_id) for a in alerts] == [("DeadLetterNeedsReview", dl_id)]
    events = [e for _, e in await raw.xrange(dlq.keys.events) if e["event"] == "alert"]
    assert events[-1]["deadLetterId"] == dl_id


async def test_past_max_replays_a_dead_letter_becomes_failed(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver
) -> None:
    (dl_id,) = await make_dead_letters(1)
    redriver = make_redriver([RedriveRule(schedule=[0], max_replays=0)])

    await redriver.run_once()

    job = await dlq.peek_dead_letter(dl_id)
    assert job is not None and job.dead_letter is not None
    assert job.dead_letter.status == "failed"
    assert await queue.get_waiting_count() == 0
    assert redriver.stats.failed == 1


async def test_the_first_matching_rule_wins(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver
) -> None:
    await make_dead_letters(1, name="email.send", error="timeout")
    await make_dead_letters(1, name="sms.send")
    rules = [
        RedriveRule(DeadLetterFilter(error_type="TimeoutError"), schedule=[0], name="timeouts"),
        RedriveRule(DeadLetterFilter(name_prefix="email."), strategy="manual"),
        RedriveRule(failed_reason_pattern=r"^bad", strategy="manual", name="bad"),
    ]
    redriver = make_redriver(rules)

    await redriver.run_once()

    assert [j.name for j in await queue.get_waiting()] == ["email.send"]
    health = await dlq.get_dead_letter_health()
    assert health.by_status == {"manual": 1, "processing": 1}


async def test_a_window_rule_replays_only_in_its_hours(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver
) -> None:
    await make_dead_letters(1)
    # 2026-01-15 01:30 in Paris is 00:30 UTC; 02:30 in Paris is 01:30 UTC.
    clock = Clock(1_768_437_000_000)
    rule = RedriveRule(strategy="window", hours=[2, 3], timezone="Europe/Paris")
    redriver = make_redriver([rule], clock=clock)

    await redriver.run_once()
    assert await queue.get_waiting_count() == 0

    clock.now += 60 * MINUTE
    await redriver.run_once()
    assert await queue.get_waiting_count() == 1


async def test_a_conditional_rule_replays_only_while_its_gate_holds(
    queue: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver
) -> None:
    await make_dead_letters(2)
    healthy = [False]

    async def gate() -> bool:
        return healthy[0]

    redriver = make_redriver([RedriveRule(strategy="conditional", gate=gate)])

    await redriver.run_once()
    assert await queue.get_waiting_count() == 0

    healthy[0] = True
    await redriver.run_once()
    assert await queue.get_waiting_count() == 2


async def test_four_redrivers_never_replay_a_dead_letter_twice(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver,
    raw: aioredis.Redis,
) -> None:  # fmt: skip
    await make_dead_letters(300)
    redrivers = [make_redriver([RedriveRule(schedule=[0])], batch_size=20) for _ in range(4)]
    tasks = [asyncio.create_task(r.run()) for r in redrivers]

    async def drained() -> bool:
        return await dlq.get_dead_letter_count() == 0

    await wait_until(drained, timeout=30, message="every dead letter replayed")
    for r in redrivers:
        await r.close()
    await asyncio.gather(*tasks)

    assert sum(r.stats.replayed for r in redrivers) == 300
    assert sum(r.stats.lost for r in redrivers) == 0  # none even tried what another held
    replayed = [e for _, e in await raw.xrange(dlq.keys.events) if e["event"] == "replayed"]
    assert len({e["jobId"] for e in replayed}) == len(replayed) == 300
    assert await queue.get_waiting_count() == 300
    assert await raw.zcard(dlq.keys.dl_claims) == 0


async def test_a_dead_redrivers_claims_expire_and_another_takes_over(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver
) -> None:
    from lazarus.redrive import claims

    ids = await make_dead_letters(3)
    held = await claims.claim(dlq.client, dlq.keys, "crashed", ids, 1_000)
    assert len(held) == 3
    redriver = make_redriver([RedriveRule(schedule=[0])])

    await redriver.run_once()
    assert redriver.stats.replayed == 0

    async def replayed() -> bool:
        await redriver.run_once()
        return await queue.get_waiting_count() == 3

    await wait_until(replayed, message="the expired claims taken over")
    assert redriver.stats.replayed == 3


async def test_outcomes_of_replays_are_counted_for_the_success_rate(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver,
    make_worker: Callable[..., Worker],
) -> None:  # fmt: skip
    await make_dead_letters(2)
    redriver = make_redriver([RedriveRule(schedule=[0], max_replays=1)])
    await redriver.run_once()

    async def succeed_first(job: Job) -> None:
        if job.data["n"] == 1:
            raise ValueError("still broken")

    make_worker(succeed_first, dead_letter_queue="jobs-dlq", concurrency=2)

    async def settled() -> bool:
        await redriver.run_once()
        health = await dlq.get_dead_letter_health()
        return health.replays_succeeded + health.replays_failed == 2

    await wait_until(settled, timeout=20, message="both outcomes seen")
    health = await dlq.get_dead_letter_health()
    assert (health.replays_succeeded, health.replays_failed) == (1, 1)
    assert health.replay_success_rate == 0.5


async def test_rules_are_reloaded_when_the_rules_file_changes(
    queue: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver,
    tmp_path: Path,
) -> None:  # fmt: skip
    await make_dead_letters(1)
    path = tmp_path / "rules.toml"
    path.write_text('[[rule]]\nstrategy = "backoff"\nschedule = ["PT1H"]\n')
    redriver = make_redriver(RulesFile(path))
    await redriver.run_once()
    assert await queue.get_waiting_count() == 0

    path.write_text('[[rule]]\nstrategy = "backoff"\nschedule = [0]\nname = "now"\n')
    await redriver.run_once()

    assert redriver.rules[0].name == "now"
    assert await queue.get_waiting_count() == 1


async def test_the_redriver_prunes_by_the_stored_policy_and_raises_health_alerts(
    dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver,
    raw: aioredis.Redis,
) -> None:  # fmt: skip
    await make_dead_letters(3)
    await dlq.set_retention_policy(RetentionPolicy(max_count=2))
    alerts: list[Alert] = []
    redriver = make_redriver(
        [RedriveRule(schedule=[3_600_000])],
        alert_rules=[AlertRule("AnyBacklog", "backlog", ">", 0, "critical")],
        on_alert=alerts.append,
    )

    await redriver.run_once()

    assert redriver.stats.pruned == 1
    assert await dlq.get_dead_letter_count() == 2
    assert [(a.name, a.state, a.value) for a in alerts] == [("AnyBacklog", "firing", 2)]
    events = [e for _, e in await raw.xrange(dlq.keys.events) if e["event"] == "alert"]
    assert events[-1]["name"] == "AnyBacklog" and events[-1]["severity"] == "critical"


async def test_dead_letters_flagged_in_one_pass_raise_one_alert(
    make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver
) -> None:
    await make_dead_letters(7)
    alerts: list[Alert] = []
    redriver = make_redriver([], on_alert=alerts.append)

    await redriver.run_once()

    assert redriver.stats.flagged == 7
    assert [(a.name, a.value, a.dead_letter_id) for a in alerts] == [
        ("DeadLetterNeedsReview", 7, None)
    ]
    assert alerts[0].message.endswith("and 2 more")


async def test_a_conditional_rules_breaker_opens_after_failed_replays(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver,
    make_worker: Callable[..., Worker],
) -> None:  # fmt: skip
    (first,) = await make_dead_letters(1)
    rule = RedriveRule(strategy="conditional", gate=lambda: True, breaker_threshold=1,
                       breaker_cooldown=3_600_000, name="gated")  # fmt: skip
    redriver = make_redriver([rule])
    await redriver.run_once()  # replays the first one

    async def fail(job: Job) -> None:
        raise ValueError("still down")

    worker = make_worker(fail, dead_letter_queue="jobs-dlq")

    async def came_back() -> bool:
        return await dlq.get_dead_letter_count() == 1

    await wait_until(came_back, message="the replayed job dead-lettered again")
    await worker.close()
    await make_dead_letters(1)

    await redriver.run_once()  # sees the failure: the breaker opens, nothing is replayed

    assert redriver.stats.replayed == 1
    assert await dlq.get_dead_letter_count() == 2
    assert (await dlq.get_dead_letter_health()).replays_failed == 1
    job = await dlq.peek_dead_letter(first)
    assert job is not None and job.dead_letter is not None
    assert job.dead_letter.status == "pending" and job.dead_letter.replay_count == 1


async def test_the_redriver_settles_a_replay_whose_job_was_cleaned_away(
    queue: Queue, dlq: Queue, make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver
) -> None:
    (dl_id,) = await make_dead_letters(1)
    new_id = await dlq.replay_dead_letter(dl_id, actor="operator:ada")
    assert await queue.clean(0, state="waiting") == [new_id]  # gone before it ran
    redriver = make_redriver([RedriveRule(schedule=[3_600_000])])

    await redriver.run_once()

    assert redriver.stats.settled == 1
    job = await dlq.peek_dead_letter(dl_id)
    assert job is not None and job.dead_letter is not None
    assert job.dead_letter.status == "pending"


async def test_alert_rules_follow_the_rules_file(
    make_dead_letters: MakeDeadLetters, make_redriver: MakeRedriver, tmp_path: Path
) -> None:
    await make_dead_letters(1)
    path = tmp_path / "rules.toml"
    path.write_text("[[rule]]\nschedule = ['PT1H']\n")
    alerts: list[Alert] = []
    redriver = make_redriver(RulesFile(path), on_alert=alerts.append, alert_interval=0.001)
    await redriver.run_once()
    assert alerts == []  # the defaults: a backlog of 1 is fine

    path.write_text(
        "[[rule]]\nschedule = ['PT1H']\n"
        "[[alert]]\nname = 'AnyBacklog'\nmetric = 'backlog'\nop = '>'\nthreshold = 0\n"
    )

    async def fired() -> bool:
        await redriver.run_once()
        return bool(alerts)

    await wait_until(fired, message="the file's alert rule evaluated")
    assert [a.name for a in alerts] == ["AnyBacklog"]
