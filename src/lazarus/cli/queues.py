"""``lazarus queues``."""

from __future__ import annotations

import click


@click.command()
def queues() -> None:
    """A table of every queue with its counts and dead-letter depth."""
