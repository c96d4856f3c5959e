"""``lazarus serve``: the HTTP API and dashboard."""

from __future__ import annotations

import ipaddress

import click

from .._connection import DEFAULT_URL


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` exposes the server to this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--redis-url", envvar="LAZARUS_REDIS_URL", default=DEFAULT_URL, show_default=True,
              help="Redis URL (or set LAZARUS_REDIS_URL).")  # fmt: skip
@click.option("--prefix", default="lazarus", show_default=True, help="Key prefix.")
@click.option("--token", envvar="LAZARUS_API_TOKEN", default=None,
              help="Bearer token required by state-changing routes (or set LAZARUS_API_TOKEN); "
                   "required to bind a non-loopback address.")  # fmt: skip
@click.option("--dead-letter-queue", default="ojs-dead-letter", show_default=True,
              help="Dead letter queue of jobs enqueued over Open Job Spec (OJS).")  # fmt: skip
@click.option(
    "--ojs-test-hooks",
    is_flag=True,
    hidden=True,
    help="Honour the OJS conformance suite's test directives (tests only).",
)
def serve(
    host: str, port: int, redis_url: str, prefix: str, token: str | None,
    dead_letter_queue: str, ojs_test_hooks: bool,
) -> None:  # fmt: skip
    """Serve the HTTP API and the dashboard with uvicorn until SIGTERM or SIGINT."""
    if not token and not is_loopback(host):
        raise click.UsageError(
            f"refusing to serve on {host!r} without a token: anyone who can reach it could "
            "replay or purge dead letters. Pass --token (or set LAZARUS_API_TOKEN), or bind "
            "127.0.0.1."
        )
    try:
        import uvicorn

        from ..http import create_app
    except ImportError as exc:
        raise click.ClickException(
            f"{exc}; install the server extra: pip install 'lazarus-queue[server]'"
        ) from None
    try:
        app = create_app(
            connection=redis_url,
            prefix=prefix,
            token=token,
            dead_letter_queue=dead_letter_queue,
            ojs_test_hooks=ojs_test_hooks,
        )
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc)) from None
    click.echo(f"lazarus API on http://{host}:{port} (prefix {prefix!r})")
    uvicorn.run(app, host=host, port=port, log_level="info")
