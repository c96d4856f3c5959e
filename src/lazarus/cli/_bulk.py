"""Replay or purge many dead letters from the CLI: count, preview, confirm, act with a progress
bar (optionally throttled), report. The work itself is ``Queue.replay_all_dead_letters`` /
``Queue.purge_dead_letters``; this module only decides whether to call them and shows it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Literal

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..dead_letter import DeadLetterFilter
from ..operators import Operators
from ..queue import Queue
from . import _render
from ._options import open_queue, stdin_is_interactive

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


class Throttle:
    """``on_progress`` for a bulk call: moves the progress bar and, with a ``rate``, sleeps
    until ``done / rate`` seconds have passed since the start, so the whole run averages about
    ``rate`` dead letters per second."""

    def __init__(
        self, rate: float | None, progress: Progress | None = None, total: int = 0
    ) -> None:
        self.rate, self.progress, self.total = rate, progress, total
        self.task = None if progress is None else progress.add_task("bulk", total=total)
        self.start = asyncio.get_running_loop().time()

    async def __call__(self, done: int) -> None:
        if self.progress is not None and self.task is not None:
            # More may match than were counted: dead letters keep arriving during a run.
            self.total = max(self.total, done)
            self.progress.update(self.task, completed=done, total=self.total)
        if self.rate:
            loop = asyncio.get_running_loop()
            wait = self.start + done / self.rate - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)


def batch_size_for(plan: BulkPlan) -> int:
    """At most ``rate`` per batch, so throttling sleeps between small steps, not huge ones."""
    if plan.rate is None:
        return plan.batch_size
    return max(1, min(plan.batch_size, int(plan.rate)))


def confirm(plan: BulkPlan, matched: int) -> None:
    """Ask before acting; refuse outright when nobody can answer and ``--yes`` was not given."""
    if plan.yes:
        return
    what = f"{plan.verb} {matched} dead letter{'s' if matched != 1 else ''} in {plan.queue!r}"
    if not stdin_is_interactive():
        raise click.ClickException(
            f"refusing to {what} without confirmation: stdin is not a terminal. "
            "Pass --yes to go ahead, or --dry-run to preview."
        )
    # A blocking prompt is fine here: nothing else runs on this command's event loop.
    click.confirm(f"{what.capitalize()}?", abort=True, err=True)


async def _act(queue: Queue, plan: BulkPlan, matched: int) -> int:
    action = queue.replay_all_dead_letters if plan.verb == "replay" else queue.purge_dead_letters
    if plan.as_json:
        return await action(
            plan.flt, batch_size=batch_size_for(plan), on_progress=Throttle(plan.rate)
        )
    progress = Progress(
        TextColumn(f"{PAST[plan.verb]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=_render.console(stderr=True),
    )  # fmt: skip
    with progress:
        throttle = Throttle(plan.rate, progress, matched)
        return await action(plan.flt, batch_size=batch_size_for(plan), on_progress=throttle)


async def run_bulk(ops: Operators, plan: BulkPlan) -> dict[str, Any]:
    """Count, preview, confirm and act; returns the report ``--json`` prints."""
    queue = await open_queue(ops, plan.queue)
    matched = await queue.count_dead_letters(plan.flt)
    sample = [job.id for job in await queue.find_dead_letters(plan.flt, limit=SAMPLE_SIZE)]
    report: dict[str, Any] = {
        "queue": plan.queue, "action": plan.verb, "dryRun": plan.dry_run,
        "matched": matched, "sample": sample, PAST[plan.verb]: 0,
    }  # fmt: skip
    out = _render.console()
    if not plan.as_json:
        noun = "dead letter matches" if matched == 1 else "dead letters match"
        out.print(f"{matched} {noun} in {plan.queue!r}")
        if sample:
            more = f" (and {matched - len(sample)} more)" if matched > len(sample) else ""
            out.print("newest: " + ", ".join(sample) + more)
    if plan.dry_run or matched == 0:
        if not plan.as_json:
            past = PAST[plan.verb]
            out.print(f"dry run: {matched} would be {past}; nothing was changed" if plan.dry_run
                      else "nothing to do")  # fmt: skip
        return report
    confirm(plan, matched)
    done = await _act(queue, plan, matched)
    report[PAST[plan.verb]] = done
    if not plan.as_json:
        where = " into their source queues" if plan.verb == "replay" else ""
        out.print(f"{PAST[plan.verb]} {done} dead letter{'s' if done != 1 else ''}{where}")
    return report
