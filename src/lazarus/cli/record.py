"""``lazarus record``: migrate, export, list, show and replay the durable SQL record of dead
letters (docs/record.md)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import LazarusError
from ..record.queries import STATUSES
from ._options import check_job_id, check_queue_name, emit_json
from ._record_options import endpoints, record_url_option, resolve_record_url, webhook_options
from .main import PREFIX_OPTION, URL_OPTION

if TYPE_CHECKING:
    from ..record import Record

T = TypeVar("T")


def run_async(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``; errors end as one line (a missing extra says how to install it)."""
    try:
        return asyncio.run(work)
    except ImportError as exc:
        raise click.ClickException(
            f"{exc}; install the record extra: pip install 'lazarus-queue[record]'"
        ) from None
    except (LazarusError, ConnectionError, OSError) as exc:
        raise click.ClickException(" ".join(str(exc).split())) from None
    except (TypeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None


async def _with_record(
    url: str | None, redis_url: str, prefix: str, work: Callable[[Record], Awaitable[T]]
) -> T:
    from ..record import Record

    record = Record(resolve_record_url(url), connection=redis_url, prefix=prefix)
    try:
        return await work(record)
    finally:
        await record.close()


@click.group()
def record() -> None:
    """The durable SQL record of every dead letter (PostgreSQL or a SQLite file)."""


@record.command()
@record_url_option(required=True)
def migrate(record_url: str | None) -> None:
    """Create or upgrade the record's tables to this lazarus's schema."""

    async def work() -> list[int]:
        from ..record import migrate as apply
        from ..record import open_database

        db = open_database(resolve_record_url(record_url))
        try:
            return await apply(db)
        finally:
            await db.close()

    applied = run_async(work())
    click.echo(f"applied migrations {applied}" if applied else "the record is up to date")


@record.command()
@record_url_option(required=True)
@webhook_options
@URL_OPTION
@PREFIX_OPTION
@click.option("--link-base", envvar="LAZARUS_PUBLIC_URL", default=None,
              help="The public URL of `lazarus serve`, for links in webhooks.")  # fmt: skip
@click.option("--claim-idle", default=30.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds before work a stopped exporter left is taken over.")  # fmt: skip
@click.option("--webhook-retry-cap", default=3600.0, show_default=True,
              type=click.FloatRange(0.1),
              help="The longest wait between two attempts of one webhook, in seconds.")  # fmt: skip
def export(
    record_url: str | None, webhook_url: str | None, webhook_secret: str | None,
    webhook_events: str, webhooks_file: str | None, redis_url: str, prefix: str,
    link_base: str | None, claim_idle: float, webhook_retry_cap: float,
) -> None:  # fmt: skip
    """Export every change of the prefix's dead letters to the record, and deliver the
    configured webhooks, until SIGTERM or SIGINT. Several may run at once."""
    hooks = endpoints(webhook_url, webhook_secret, webhook_events, webhooks_file)
    url = resolve_record_url(record_url) if record_url or not hooks else None

    async def work() -> None:
        from .._connection import connect
        from ..record import open_database
        from ..record.service import drain

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        redis = connect(redis_url)
        db = open_database(url) if url else None
        click.echo(f"exporting the dead letters of prefix {prefix!r} (SIGTERM stops)")
        try:
            await drain(
                redis, stop, db=db, endpoints=hooks, prefix=prefix, link_base=link_base,
                claim_idle_ms=int(claim_idle * 1000), max_delay=webhook_retry_cap,
            )  # fmt: skip
        finally:
            if db is not None:
                await db.close()
            await redis.aclose()

    run_async(work())
    click.echo("stopped")


@record.command(name="list")
@record_url_option(required=True)
@URL_OPTION
@PREFIX_OPTION
@click.option("--job-type", default=None, help="Only dead letters of this job name.")
@click.option("--status", type=click.Choice(STATUSES), help="Only dead letters with this status.")
@click.option(
    "--queue",
    "queue_name",
    default=None,
    callback=check_queue_name,
    help="Only this dead letter queue.",
)
@click.option("--page", default=1, show_default=True, type=click.IntRange(1))
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_(
    record_url: str | None, redis_url: str, prefix: str, job_type: str | None,
    status: str | None, queue_name: str | None, page: int, limit: int, as_json: bool,
) -> None:  # fmt: skip
    """List the record's dead letters, newest first."""
    from ..record.shapes import page_json

    async def work(record: Record) -> Any:
        return await record.list(
            page=page, limit=limit, job_type=job_type, status=status, queue=queue_name
        )

    found = run_async(_with_record(record_url, redis_url, prefix, work))
    if as_json:
        emit_json(page_json(found))
        return
    for row in found.rows:
        click.echo(
            f"{row['id']}  {row['failed_at']:%Y-%m-%d %H:%M:%S}  {row['status']:<10} "
            f"{row['job_type']:<20} {row['error_type']}: {(row['failure_reason'] or '')[:60]}"
        )
    pages = max(found.total_pages, 1)
    click.echo(f"{found.total} dead letters in the record; page {page} of {pages}")


@record.command()
@click.argument("dead_letter_id", metavar="ID", callback=check_job_id)
@record_url_option(required=True)
@URL_OPTION
@PREFIX_OPTION
def show(dead_letter_id: str, record_url: str | None, redis_url: str, prefix: str) -> None:
    """Show one dead letter of the record, with its payload and every change, as JSON."""
    from ..record.shapes import detail_json

    async def work(record: Record) -> Any:
        return await record.get(dead_letter_id)

    row = run_async(_with_record(record_url, redis_url, prefix, work))
    if row is None:
        raise click.ClickException(f"no dead letter {dead_letter_id!r} in the record")
    emit_json(detail_json(row))


@record.command()
@click.argument("dead_letter_id", metavar="ID", callback=check_job_id)
@record_url_option(required=True)
@URL_OPTION
@PREFIX_OPTION
def replay(dead_letter_id: str, record_url: str | None, redis_url: str, prefix: str) -> None:
    """Replay a recorded dead letter into its source queue, even one Redis no longer holds."""

    async def work(record: Record) -> str:
        return await record.replay(dead_letter_id)

    new_id = run_async(_with_record(record_url, redis_url, prefix, work))
    click.echo(f"replayed {dead_letter_id} as job {new_id}")


async def forget_group(redis_url: str, prefix: str, group: str, extra_keys: str = "") -> int:
    """Drop consumer group ``group`` from every dead letter queue's outbox (and the per-queue
    key named by ``extra_keys``: a webhook endpoint's retries); returns how many queues."""
    from .._connection import connect
    from ..record.outbox import Outbox

    redis = connect(redis_url)
    try:
        outbox = Outbox(redis, prefix, group=group, consumer="-")
        queues = await outbox.dead_letter_queues()
        for queue in queues:
            await outbox.forget(queue)
            if extra_keys:
                await redis.delete(outbox.keys(queue).dl_webhook_schedule(extra_keys))
        return len(queues)
    finally:
        await redis.aclose()


@record.command()
@URL_OPTION
@PREFIX_OPTION
def forget(redis_url: str, prefix: str) -> None:
    """Stop keeping changes for the record: drop the exporter's place in every outbox (an
    outbox nothing else drains is switched off and deleted). Run it when the record is
    retired for good; `lazarus record export` switches it on again."""
    count = run_async(forget_group(redis_url, prefix, "record"))
    click.echo(f"the record no longer holds back the outbox of {count} dead letter queues")
