"""End-to-end demo of lazarus: jobs that fail for good end up in a dead letter queue, where an
operator finds out why, replays the ones a fix has repaired and purges the rest.

Run it with ``make demo`` (or ``python examples/demo.py --jobs 500``). It starts its own
private redis-server, so nothing else is needed.

The jobs are payments. By design:

* about 5% hit a gateway timeout on their first attempt and succeed on the retry;
* about 1% are in a currency the shop does not accept yet: they fail every attempt and are
  dead-lettered with reason ``attempts_exhausted`` — the "fixable" failure;
* about 1% have no customer: the processor raises an ``UnrecoverableError`` and they are
  dead-lettered at once with reason ``unrecoverable``;
* one looks like fraud: the processor raises ``DeadLetterError`` (reason ``discarded``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lazarus import DeadLetterError, DeadLetterFilter, Job, Queue, UnrecoverableError, Worker
from lazarus.embedded import EmbeddedRedis
from lazarus.history import DeadLetterReason

QUEUE = "payments"
DLQ = f"{QUEUE}-dlq"
CONCURRENCY = 20
ATTEMPTS = 3
BACKOFF = {"type": "exponential", "delay": 5}
ADD_CHUNK = 250
TIMEOUT_S = 45.0


class GatewayTimeoutError(Exception):
    """A transient failure: the next attempt succeeds."""


class UnsupportedCurrencyError(Exception):
    """The shop does not accept this currency (yet): fails on every attempt."""


class InvalidOrderError(UnrecoverableError):
    """The order itself is broken: retrying cannot help."""


@dataclasses.dataclass
class Shop:
    """The system the processor talks to; ``accepted`` changes when the fix is deployed."""

    accepted: set[str] = dataclasses.field(default_factory=lambda: {"EUR", "USD", "GBP"})

    async def charge(self, job: Job) -> dict[str, Any]:
        order = job.data
        await asyncio.sleep(0.001)  # the call to the payment gateway
        if order.get("flaky") and job.attempts_made == 0:
            raise GatewayTimeoutError("payment gateway did not answer within 3s")
        if "customer" not in order:
            raise InvalidOrderError(f"order {order['order']} has no customer")
        if order.get("fraud_score", 0) > 90:
            raise DeadLetterError(f"fraud score {order['fraud_score']}: needs a human")
        if order["currency"] not in self.accepted:
            raise UnsupportedCurrencyError(f"currency {order['currency']} is not accepted")
        return {"charged": order["amount_cents"], "currency": order["currency"]}


def make_order(index: int, fraud_index: int) -> dict[str, Any]:
    """Payment ``index``; which ones fail, and how, is fixed by the index."""
    order: dict[str, Any] = {
        "order": index,
        "customer": f"cust-{index % 97}",
        "amount_cents": 100 + index % 9_900,
        "currency": ("EUR", "USD", "GBP")[index % 3],
    }
    if index % 20 == 3:
        order["flaky"] = True
    if index % 100 == 17:
        order["currency"] = "JPY"
    if index % 100 == 59:
        del order["customer"]
    if index == fraud_index:
        order["fraud_score"] = 97
    return order


@dataclasses.dataclass
class Tally:
    """What the worker reported, and an event set when ``expected`` jobs have finished."""

    expected: int
    completed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    retried: int = 0
    replays_completed: int = 0
    done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    progress: Progress | None = None
    bar: Any = None  # the progress task that finished jobs advance

    @property
    def finished(self) -> int:
        return self.completed + self.failed

    def finish_one(self) -> None:
        if self.progress is not None:
            self.progress.advance(self.bar)
        if self.finished >= self.expected:
            self.done.set()

    async def wait(self, expected: int) -> None:
        """Wait until ``expected`` jobs in all have finished (completed or failed for good)."""
        self.expected = expected
        self.done.clear()
        if self.finished < expected:
            await asyncio.wait_for(self.done.wait(), TIMEOUT_S)


def watch(worker: Worker, tally: Tally) -> None:
    """Drive the progress bar and the tally from the worker's own events."""

    def completed(job: Job, result: Any) -> None:
        tally.completed += 1
        if job.replay_count:
            tally.replays_completed += 1
        tally.finish_one()

    def failed(job: Job, error: BaseException) -> None:  # terminal failures only
        tally.failed += 1
        tally.finish_one()

    def dead_lettered(job: Job, dead_letter_id: str) -> None:
        tally.dead_lettered += 1

    def retrying(job: Job, error: BaseException) -> None:
        tally.retried += 1

    worker.on("completed", completed)
    worker.on("failed", failed)
    worker.on("deadLettered", dead_lettered)
    worker.on("retrying", retrying)


def progress_bars(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=console,
    )  # fmt: skip


async def produce(queue: Queue, jobs: int, progress: Progress, task: Any) -> None:
    fraud_index = jobs // 2 + 1
    for start in range(0, jobs, ADD_CHUNK):
        batch = [
            {"name": "charge", "data": make_order(i, fraud_index), "attempts": ATTEMPTS,
             "backoff": BACKOFF}
            for i in range(start, min(start + ADD_CHUNK, jobs))
        ]  # fmt: skip
        await queue.add_bulk(batch)
        progress.advance(task, len(batch))


def summary_table(tally: Tally, jobs: int, elapsed: float) -> Table:
    table = Table(title=f"Summary: {jobs} payments", title_justify="left")
    table.add_column("Outcome")
    table.add_column("Count", justify="right")
    table.add_row("Completed", str(tally.completed))
    table.add_row("Retried attempts", str(tally.retried))
    table.add_row("Dead-lettered", str(tally.dead_lettered))
    table.add_row("Elapsed", f"{elapsed:.2f} s")
    table.add_row("Throughput", f"{jobs / elapsed:,.0f} jobs/s")
    return table


async def dead_letter_table(dlq: Queue) -> Table:
    """Group the dead letters by error type and reason, counting each group with a filter."""
    groups: dict[tuple[str, DeadLetterReason], str] = {}
    for job in await dlq.get_dead_letter_jobs():
        meta = job.dead_letter
        assert meta is not None
        groups.setdefault((meta.error_type, meta.reason), meta.failed_reason)
    table = Table(title=f"Dead letters in {DLQ!r}", title_justify="left")
    table.add_column("Error type", no_wrap=True)
    table.add_column("Reason", no_wrap=True)
    table.add_column("Count", justify="right")
    table.add_column("Example failure")
    for (error_type, reason), example in sorted(groups.items()):
        flt = DeadLetterFilter(error_type=error_type, reason=reason)
        table.add_row(error_type, reason, str(await dlq.count_dead_letters(flt)), example)
    return table


async def operate(console: Console, shop: Shop, dlq: Queue, tally: Tally) -> tuple[int, int]:
    """An operator's flow: fix the cause, replay what the fix repairs, purge the rest."""
    fixable = DeadLetterFilter(error_type="UnsupportedCurrencyError", source_queue=QUEUE)
    console.print(
        f"\n[bold]Operator:[/] {await dlq.count_dead_letters(fixable)} dead letters failed "
        "on an unsupported currency. Deploying the fix (accept JPY), then replaying them."
    )
    shop.accepted.add("JPY")
    before = tally.finished
    tally.expected = sys.maxsize  # until we know how many were replayed
    with progress_bars(console) as progress:
        tally.progress = progress
        tally.bar = progress.add_task("replays finished", total=None)
        replayed = await dlq.replay_all_dead_letters(fixable, batch_size=100)
        progress.update(tally.bar, total=replayed)
        await tally.wait(before + replayed)
    console.print(f"Replayed {replayed} dead letters; {tally.replays_completed} completed.")
    rest = await dlq.count_dead_letters()
    purged = await dlq.purge_dead_letters()
    console.print(
        f"Purged the other {purged} of {rest} (bad data, and a suspected fraud after a look). "
        f"Dead letters left: {await dlq.get_dead_letter_count()}."
    )
    return replayed, purged


async def main(jobs: int) -> int:
    console = Console()
    async with EmbeddedRedis() as server:
        version = ".".join(map(str, server.version))
        console.print(f"[bold]lazarus demo[/]: redis-server {version} at {server.url}")
        queue = Queue(QUEUE, connection=server.url)
        dlq = Queue(DLQ, connection=server.url)
        shop = Shop()
        tally = Tally(expected=jobs)
        worker = Worker(
            QUEUE, shop.charge, connection=server.url, concurrency=CONCURRENCY,
            dead_letter_queue=DLQ, block_timeout=1.0,
        )  # fmt: skip
        watch(worker, tally)
        started = time.perf_counter()
        with progress_bars(console) as progress:
            added = progress.add_task("jobs added", total=jobs)
            tally.progress = progress
            tally.bar = progress.add_task("jobs finished", total=jobs)
            await produce(queue, jobs, progress, added)
            await tally.wait(jobs)
        elapsed = time.perf_counter() - started
        console.print(summary_table(tally, jobs, elapsed))
        console.print(await dead_letter_table(dlq))
        dead_before = await dlq.get_dead_letter_count()
        replayed, purged = await operate(console, shop, dlq, tally)
        await worker.close()
        completed_in_redis = await queue.get_completed_count()
        await queue.close()
        await dlq.close()
    return report_problems(console, tally, jobs, dead_before, replayed, purged,
                           completed_in_redis)  # fmt: skip


def report_problems(
    console: Console, tally: Tally, jobs: int, dead_before: int, replayed: int, purged: int,
    completed_in_redis: int,
) -> int:  # fmt: skip
    """Check that every job is accounted for; the exit code says whether it was."""
    problems = []
    if tally.completed + tally.dead_lettered != jobs + replayed:
        problems.append("some jobs neither completed nor were dead-lettered")
    if dead_before != tally.dead_lettered or replayed + purged != dead_before:
        problems.append("dead letters do not add up")
    if tally.replays_completed != replayed or completed_in_redis != tally.completed:
        problems.append("replayed jobs did not all complete")
    for problem in problems:
        console.print(f"[red]problem:[/] {problem}")
    if not problems:
        console.print(
            f"[green]All {jobs} payments accounted for:[/] {tally.completed} completed "
            f"({replayed} after replay), {purged} purged from the dead letter queue."
        )
    return 1 if problems else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2_000, help="payments to add (default 2000)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args().jobs)))
