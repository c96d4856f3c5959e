"""``lazarus dlq ...``: list, show, stats, replay, purge."""

from __future__ import annotations

import click


@click.group()
def dlq() -> None:
    """Inspect, replay and purge dead letters."""
