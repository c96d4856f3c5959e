"""``lazarus serve``: the HTTP API and dashboard."""

from __future__ import annotations

import click


@click.command()
def serve() -> None:
    """Serve the HTTP API and the dashboard."""
