"""The audit finds each kind of fault it reports (fast; part of the default run).

A fault-injection suite whose audit cannot see a lost or duplicated job would pass for ever:
these tests hand the audit a queue in which each kind of fault happened and expect it named.
"""

from __future__ import annotations

from collections import Counter

import pytest

from lazarus import Job, JobOptions
from lazarus.history import AttemptRecord, DeadLetterMetadata

from .audit import STATES, Snapshot, judge
from .jobs import DOOMED, OK, JobSpec
from .pool import RunLog
from .report import Findings


def letter(original: str, *, stalled: bool = False) -> Job:
    attempt = AttemptRecord(1, 0, 0, "w", "stalled" if stalled else "failed", "boom", "E")
    meta = DeadLetterMetadata(
        source_queue="q", original_job_id=original, failed_reason="boom", stacktrace=[],
        attempts_made=1, dead_lettered_at=0, original_timestamp=0, original_opts={},
        error_type="E", reason="attempts_exhausted", attempts=[attempt], replay_count=0,
    )  # fmt: skip
    return Job(f"dl-{original}", "n", {}, JobOptions(), "dlq", 0, dead_letter=meta)


def snap(**states: list[str]) -> Snapshot:
    """A queue whose jobs are in ``states`` (with a hash each unless ``nohash`` lists them);
    ``dead`` lists the original ids of dead letters, ``stalled`` the ids that stalled."""
    dead_ids, no_hash = states.pop("dead", []), set(states.pop("nohash", []))
    stalled = states.pop("stalled", [])
    members = {s: set(states.get(s, [])) for s in STATES}
    entries = Counter(i for s in STATES for i in states.get(s, []))
    hashes = {i for s in ("active", "wait", "completed") for i in states.get(s, [])} - no_hash
    hashes |= set(states.get("orphan_hash", []))
    dead: dict[str, list[Job]] = {}
    for original in dead_ids:
        dead.setdefault(original, []).append(letter(original))
    return Snapshot(members, entries, hashes, {i: 1 for i in stalled}, dead)


SPECS = [JobSpec("a", OK, {}, 1), JobSpec("b", DOOMED, {}, 2)]


def runs(**counts: int) -> RunLog:
    return RunLog(
        {i: [(1, n, 0.0) for n in range(c)] for i, c in counts.items()}, {}, Counter(), []
    )


def test_a_queue_without_faults_has_no_findings() -> None:
    found = judge(Findings("x", 2), SPECS, snap(completed=["a"], dead=["b"]), runs(a=1, b=2),
                  healthy=lambda _: True)  # fmt: skip
    assert found.violations() == {}
    assert found.exec_dups == 0


@pytest.mark.parametrize(
    ("state", "category"),
    [
        ({"completed": ["a"]}, "lost"),  # b: in no state, no hash, no dead letter
        ({"completed": ["a"], "dead": ["b", "b"]}, "duplicated"),
        ({"completed": ["a", "b"], "dead": ["b"]}, "duplicated"),
        ({"completed": ["a"], "wait": ["b", "b"]}, "duplicated"),
        ({"completed": ["a"], "active": ["b"]}, "stuck"),
        ({"completed": ["a"], "wait": ["b"]}, "undrained"),
        ({"completed": ["a"], "wait": ["b"], "dead": ["b"]}, "half_moved"),
        ({"completed": ["a"], "orphan_hash": ["b"]}, "half_moved"),
        ({"completed": ["a", "b"], "nohash": ["b"]}, "half_moved"),
        ({"completed": ["a", "b"], "stalled": ["a"]}, "spurious_stalls"),
    ],
)
def test_each_fault_is_found(state: dict[str, list[str]], category: str) -> None:
    found = judge(Findings("x", 2), SPECS, snap(**state), runs(), healthy=lambda _: True)
    assert category in found.violations()
    with pytest.raises(AssertionError, match=category.replace("_", " ")):
        found.check()


def test_a_stalled_dead_letter_is_a_stall_and_extra_runs_are_execution_duplicates() -> None:
    queue = snap(completed=["a"])
    queue.dead["b"] = [letter("b", stalled=True)]
    found = judge(Findings("x", 2), SPECS, queue, runs(a=3, b=2), healthy=lambda i: i == "b")
    assert found.spurious_stalls == ["b"]
    assert found.exec_dups == 2


def test_stalls_are_not_judged_where_workers_are_killed_on_purpose() -> None:
    queue = snap(completed=["a", "b"], stalled=["a"])
    found = judge(Findings("x", 2), SPECS, queue, runs(), healthy=None)
    assert found.violations() == {}
    assert "n/a" in found.row()


def test_the_worker_reports_two_completions_of_one_job_as_a_duplicate() -> None:
    log = runs(a=1)
    log.events["a"] = Counter({"C": 2})
    found = judge(Findings("x", 2), SPECS, snap(completed=["a"], dead=["b"]), log, None)
    assert found.duplicated == ["a"]


def test_a_worker_that_died_by_itself_breaks_the_scenario() -> None:
    log = runs(a=1, b=2)
    log.deaths.append("123: OutOfMemoryError command not allowed")
    found = judge(Findings("x", 2), SPECS, snap(completed=["a"], dead=["b"]), log, None)
    assert found.violations() == {"worker died by itself": log.deaths}
