"""Replay or purge many dead letters from the CLI: count, preview, confirm, act with a progress
bar, report. The work itself, throttling (``rate``) included, is
``Queue.replay_all_dead_letters`` / ``Queue.purge_dead_letters``; this module only decides
whether to call them and shows their ``on_progress`` reports.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..dead_letter import DeadLetterFilter, bulk
from ..operators import Operators
from ..queue import Queue
from . import _render
from ._options import confirm, open_queue

SAMPLE_SIZE = 5
Verb = Literal["replay", "purge"]
PAST = {"replay": "replayed", "purge": "purged"}


@dataclasses.dataclass(frozen=True)
class BulkPlan:
    """What the operator asked for: ``verb`` every dead letter of ``queue`` matching ``flt``."""

    verb: Verb
    queue: str
    flt: DeadLetterFilter
    dry_run: bool
    yes: bool
    batch_size: int
    rate: float | None
    as_json: bool
    who: dict[str, Any] = dataclasses.field(default_factory=dict)  # a replay's actor and note
    as_of: int | None = None  # the moment of an earlier run that stopped half-way (a resume)


class ProgressBar:
    """``on_progress`` for a bulk call: moves the progress bar to the number handled so far.
    The library calls it after each batch; throttling (``rate``) is the library's too."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress, self.total = progress, total
        self.task = progress.add_task("bulk", total=total)

    def __call__(self, done: int) -> None:
        # More can be handled than were counted: the count came a moment before the walk.
        self.total = max(self.total, done)
        self.progress.update(self.task, completed=done, total=self.total)


def tally_of(plan: BulkPlan, as_of: int) -> str:
    """The tally a run counts in: one name for a run and every run that resumes it (the same
    command, with the first one's moment as ``--as-of``)."""
    shape = json.dumps(dataclasses.asdict(plan.flt), sort_keys=True, default=str)
    return f"cli-{plan.verb}-{as_of}-{hashlib.sha1(shape.encode()).hexdigest()[:12]}"


async def _act(queue: Queue, plan: BulkPlan, matched: int, as_of: int, tally: str) -> int:
    action: Callable[..., Awaitable[int]] = queue.purge_dead_letters
    if plan.verb == "replay":
        action = functools.partial(queue.replay_all_dead_letters, **plan.who)
    action = functools.partial(action, as_of=as_of, tally=tally)
    if plan.as_json:
        return await action(plan.flt, batch_size=plan.batch_size, rate=plan.rate)
    progress = Progress(
        TextColumn(f"{PAST[plan.verb]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=_render.console(stderr=True),
    )  # fmt: skip
    with progress:
        return await action(
            plan.flt, batch_size=plan.batch_size, rate=plan.rate,
            on_progress=ProgressBar(progress, matched),
        )  # fmt: skip


async def run_bulk(ops: Operators, plan: BulkPlan) -> dict[str, Any]:
    """Count, preview, confirm and act; returns the report ``--json`` prints."""
    queue = await open_queue(ops, plan.queue)
    # What had arrived by the run's moment: now, or the moment of the run it resumes.
    as_of = bulk.check_as_of(plan.as_of)
    tally = tally_of(plan, as_of)
    bounded = bulk.snapshot(plan.flt, as_of)
    matched, sample = 0, []
    if bounded is not None:
        matched = await queue.count_dead_letters(bounded)
        newest = await queue.search_dead_letters(bounded, limit=SAMPLE_SIZE)
        sample = [job.id for job in newest.jobs]
    report: dict[str, Any] = {
        "queue": plan.queue, "action": plan.verb, "dryRun": plan.dry_run,
        "matched": matched, "sample": sample, PAST[plan.verb]: 0, "asOf": as_of, "inAll": 0,
    }  # fmt: skip
    out = _render.console()
    if not plan.as_json:
        noun = "dead letter matches" if matched == 1 else "dead letters match"
        out.print(f"{matched} {noun} in {plan.queue!r}, as of {as_of}")
        if sample:
            more = f" (and {matched - len(sample)} more)" if matched > len(sample) else ""
            out.print("newest: " + ", ".join(sample) + more)
    if plan.dry_run or matched == 0:
        if not plan.dry_run:  # nothing left: what the runs it resumes did, if any
            report["inAll"] = await queue.get_dead_letter_tally(tally)
        if not plan.as_json:
            past = PAST[plan.verb]
            out.print(f"dry run: {matched} would be {past}; nothing was changed" if plan.dry_run
                      else "nothing to do")  # fmt: skip
        return report
    confirm(f"{plan.verb} {matched} dead letter{'s' if matched != 1 else ''} in {plan.queue!r}",
            yes=plan.yes)  # fmt: skip
    if not plan.as_json:
        out.print(f"(should this run stop half-way, the same command with --as-of {as_of} "
                  "resumes it)")  # fmt: skip
    done = await _act(queue, plan, matched, as_of, tally)
    # With the runs it resumes: what every run as of this moment did, counted by Redis.
    in_all = max(done, await queue.get_dead_letter_tally(tally))
    report[PAST[plan.verb]], report["inAll"] = done, in_all
    if not plan.as_json:
        where = " into their source queues" if plan.verb == "replay" else ""
        resumed = f" ({in_all} in all, with the runs it resumes)" if in_all > done else ""
        out.print(f"{PAST[plan.verb]} {done} dead letter{'s' if done != 1 else ''}{where}"
                  f"{resumed}")  # fmt: skip
    return report
