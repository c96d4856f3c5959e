"""``lazarus serve``: the HTTP API and dashboard."""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._connection import DEFAULT_URL
from ._record_options import endpoints, outbox_drainers, record_url_option, webhook_options
from ._startup import freeze_start_up

if TYPE_CHECKING:
    pass

WILDCARDS = frozenset({"0.0.0.0", "::", "[::]"})


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` exposes the server to this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def token_text(token: str | None, tokens_file: str | None) -> tuple[str | None, str | None]:
    """The configured credentials: one token, or the text of named tokens (from
    ``LAZARUS_API_TOKENS`` and the tokens file, one ``name:role:token`` per line)."""
    named = [os.environ.get("LAZARUS_API_TOKENS", "")]
    if tokens_file:
        try:
            named.append(Path(tokens_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise click.BadParameter(str(exc), param_hint="--tokens-file") from None
    text = "\n".join(part for part in named if part.strip())
    return token or None, text or None


def allowed(host: str, extra: tuple[str, ...]) -> list[str]:
    """The host names the ``Host`` header may carry."""
    from ..http.guard import LOOPBACK_HOSTS

    names = set(LOOPBACK_HOSTS) | {h.lower() for h in extra}
    if host not in WILDCARDS and not is_loopback(host):
        names.add(host.lower())
    elif host in WILDCARDS and not extra:
        raise click.UsageError(
            f"binding {host} serves every address of this machine: name the host names "
            "clients use with --allowed-host (repeatable), or '*' behind a proxy that checks "
            "the Host header"
        )
    return sorted(names)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--redis-url", envvar="LAZARUS_REDIS_URL", default=DEFAULT_URL, show_default=True,
              help="Redis URL (or set LAZARUS_REDIS_URL).")  # fmt: skip
@click.option("--prefix", default="lazarus", show_default=True, help="Key prefix.")
@click.option("--token", envvar="LAZARUS_API_TOKEN", default=None, show_envvar=True,
              help="One token with every right. Prefer the environment variable: a command "
                   "line is visible to every user of the machine.")  # fmt: skip
@click.option("--tokens-file", envvar="LAZARUS_API_TOKENS_FILE", default=None,
              type=click.Path(dir_okay=False), show_envvar=True,
              help="Named tokens with roles, one 'name:role:token' per line "
                   "(also LAZARUS_API_TOKENS, comma-separated).")  # fmt: skip
@click.option("--insecure-no-auth", is_flag=True,
              help="Let every request in without credentials: loopback only, for demos and "
                   "test suites.")  # fmt: skip
@click.option("--allowed-host", multiple=True, metavar="NAME",
              help="A host name clients use (the Host header); repeatable.")  # fmt: skip
@click.option(
    "--max-body-bytes",
    default=1 << 20,
    show_default=True,
    type=click.IntRange(1024, 1 << 30),
    help="Largest request body accepted.",
)
@click.option(
    "--max-connections",
    default=200,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Concurrent connections before 503s.",
)
@click.option("--header-timeout", default=10.0, show_default=True,
              type=click.FloatRange(0.1, 300),
              help="Seconds a client may take to send its request headers.")  # fmt: skip
@click.option("--docs", is_flag=True, help="Serve the interactive API docs at /docs.")
@click.option("--bulk-lease", default=30.0, show_default=True, type=click.FloatRange(1, 3600),
              help="Seconds after which a bulk operation whose server stopped is resumed by "
                   "another.")  # fmt: skip
@click.option("--dead-letter-queue", default="ojs-dead-letter", show_default=True,
              help="Dead letter queue of jobs enqueued over Open Job Spec (OJS).")  # fmt: skip
@click.option(
    "--ojs-test-hooks",
    is_flag=True,
    hidden=True,
    help="Honour the OJS conformance suite's test directives (tests only).",
)
@record_url_option(required=False)
@webhook_options
@click.option("--link-base", envvar="LAZARUS_PUBLIC_URL", default=None,
              help="This server's public URL, for links in webhooks.")  # fmt: skip
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    redis_url: str,
    prefix: str,
    token: str | None,
    tokens_file: str | None,
    insecure_no_auth: bool,
    allowed_host: tuple[str, ...],
    max_body_bytes: int,
    max_connections: int,
    header_timeout: float,
    docs: bool,
    bulk_lease: float,
    dead_letter_queue: str,
    ojs_test_hooks: bool,
    record_url: str | None,
    webhook_url: str | None,
    webhook_secret: str | None,
    webhook_events: str,
    webhooks_file: str | None,
    link_base: str | None,
) -> None:
    """Serve the HTTP API and the dashboard with uvicorn until SIGTERM or SIGINT; with a
    record or webhooks configured, export and deliver the dead letter outbox beside it.

    Every route but /health needs a token. With none configured, a random one is made and
    printed with a sign-in link."""
    try:
        from ..http import create_app
        from ..http.server import run
    except ImportError as exc:
        raise click.ClickException(
            f"{exc}; install the server extra: pip install 'lazarus-queue[server]'"
        ) from None
    single, named = token_text(token, tokens_file)
    if insecure_no_auth and not is_loopback(host):
        raise click.UsageError(f"--insecure-no-auth serves loopback only, not {host!r}")
    generated = None
    if not insecure_no_auth and not single and not named:
        generated = single = secrets.token_urlsafe(24)
    if ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE:
        click.echo("warning: --token on the command line is visible to every user of this "
                   "machine (ps); set LAZARUS_API_TOKEN instead", err=True)  # fmt: skip
    try:
        hooks = endpoints(webhook_url, webhook_secret, webhook_events, webhooks_file)
        app = create_app(
            connection=redis_url, prefix=prefix, token=single, tokens=named,
            auth=not insecure_no_auth, allowed_hosts=allowed(host, allowed_host),
            max_body_bytes=max_body_bytes, docs=docs, dead_letter_queue=dead_letter_queue,
            ojs_test_hooks=ojs_test_hooks, record=record_url,
            drainers=outbox_drainers(redis_url, prefix, record_url, hooks, link_base),
            bulk_lease=bulk_lease,
        )  # fmt: skip
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc)) from None
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"lazarus API on http://{shown}:{port} (prefix {prefix!r})")
    if insecure_no_auth:
        click.echo("WARNING: authentication is OFF (--insecure-no-auth): every program on "
                   "this machine can read, replay and purge everything.", err=True)  # fmt: skip
    if generated:
        click.echo(f"No token configured; this run's token (every right): {generated}")
        click.echo(f"Sign in: http://{shown}:{port}/dashboard/login?token={generated}")
    freeze_start_up()
    run(app, host=host, port=port, max_connections=max_connections, header_timeout=header_timeout)
