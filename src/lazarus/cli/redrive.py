"""``lazarus redrive``, ``lazarus health`` and ``lazarus alerts``: the redrive service, the
health of a dead letter queue, and its alert rules (also as a Prometheus rules file)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ._record_options import endpoints, outbox_drainers, record_url_option, webhook_options
from .main import PREFIX_OPTION, URL_OPTION, check_name, one_line

if TYPE_CHECKING:
    from ..dead_letter import DeadLetterHealth
    from ..redrive import RulesFile

RULES_OPTION = click.option(
    "--rules", "rules_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None, help="TOML rules file (re-read when it changes).",
)  # fmt: skip


def _rules_file(path: Path | None) -> RulesFile | None:
    from ..redrive import RulesFile

    if path is None:
        return None
    try:
        return RulesFile(path)
    except ValueError as exc:
        raise click.BadParameter(one_line(str(exc)), param_hint="'--rules'") from None


@click.command()
@click.argument("dlq", callback=check_name)
@RULES_OPTION
@click.option("--poll-interval", default=30.0, show_default=True, type=click.FloatRange(min=0.01),
              help="Seconds between two passes.")  # fmt: skip
@click.option("--once", is_flag=True, help="Run one pass, print what it did, and exit.")
@URL_OPTION
@PREFIX_OPTION
@record_url_option(required=False)
@webhook_options
@click.option("--link-base", envvar="LAZARUS_PUBLIC_URL", default=None,
              help="The HTTP server's public URL, for links in webhooks.")  # fmt: skip
def redrive(
    dlq: str, rules_path: Path | None, poll_interval: float, once: bool, redis_url: str,
    prefix: str, record_url: str | None, webhook_url: str | None, webhook_secret: str | None,
    webhook_events: str, webhooks_file: str | None, link_base: str | None,
) -> None:  # fmt: skip
    """Apply redrive rules to the pending dead letters of DLQ until SIGTERM or SIGINT; also
    prune it by its retention policy and evaluate its alert rules. With a record or webhooks
    configured, it exports and delivers the dead letter outbox beside its work."""
    from ..redrive import DEFAULT_ALERTS, Redriver

    source = _rules_file(rules_path)
    alerts = DEFAULT_ALERTS if source is None or source.alerts is None else source.alerts
    redriver = Redriver(
        dlq, source if source is not None else (), connection=redis_url, prefix=prefix,
        poll_interval=poll_interval, alert_rules=alerts,
    )  # fmt: skip

    async def serve() -> None:
        if once:
            try:
                await redriver.run_once()
            finally:
                await redriver.close()
            s = redriver.stats
            click.echo(f"replayed {s.replayed}, flagged manual {s.flagged}, failed {s.failed}, "
                       f"pruned {s.pruned}")  # fmt: skip
            return
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s %(message)s")  # fmt: skip
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        hooks = endpoints(webhook_url, webhook_secret, webhook_events, webhooks_file)
        beside = [asyncio.create_task(drain(stop)) for drain in
                  outbox_drainers(redis_url, prefix, record_url, hooks, link_base)]  # fmt: skip
        run = asyncio.create_task(redriver.run())
        click.echo(f"{redriver.id} redriving {dlq!r} with {len(redriver.rules)} rules")
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({run, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stop.set()
        await redriver.close()
        await asyncio.gather(*beside, return_exceptions=True)
        stopped.cancel()
        if run.done() and run.exception() is not None:
            raise run.exception()  # type: ignore[misc]

    asyncio.run(serve())


@click.command()
@click.argument("dlq", callback=check_name)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@URL_OPTION
@PREFIX_OPTION
def health(dlq: str, as_json: bool, redis_url: str, prefix: str) -> None:
    """Show the health of dead letter queue DLQ: ingestion, backlog, resolution, time in it."""
    from ..queue import Queue

    async def measure() -> dict[str, object]:
        async with Queue(dlq, connection=redis_url, prefix=prefix) as queue:
            return (await queue.get_dead_letter_health()).to_json()

    report = asyncio.run(measure())
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    for name, value in report.items():
        click.echo(f"{name:20} {value}")


@click.command()
@click.argument("dlq", required=False, callback=check_name)
@RULES_OPTION
@click.option("--prometheus-rules", is_flag=True,
              help="Print the alert rules as a Prometheus alerting-rules file.")  # fmt: skip
@URL_OPTION
@PREFIX_OPTION
def alerts(
    dlq: str | None, rules_path: Path | None, prometheus_rules: bool, redis_url: str, prefix: str
) -> None:
    """Print the alert rules (the defaults, or those of --rules) as a Prometheus rules file, or
    show which of them fire now on DLQ."""
    from ..redrive import DEFAULT_ALERTS
    from ..redrive import prometheus_rules as render

    source = _rules_file(rules_path)
    rules = DEFAULT_ALERTS if source is None or source.alerts is None else source.alerts
    if prometheus_rules:
        click.echo(render(rules), nl=False)
        return
    if dlq is None:
        raise click.UsageError("give a DLQ to evaluate, or --prometheus-rules")
    from ..queue import Queue

    async def measure() -> DeadLetterHealth:
        async with Queue(dlq, connection=redis_url, prefix=prefix) as queue:
            return await queue.get_dead_letter_health()

    health_now = asyncio.run(measure())
    for rule in rules:
        fires, value = rule.fires(health_now)
        state = "FIRING" if fires else "ok"
        click.echo(f"{state:7} {rule.name} ({rule.severity}): {rule.metric} = {value} "
                   f"{rule.op} {rule.threshold:g}?")  # fmt: skip
