"""The HTTP API and dashboard app (``pip install lazarus-queue[server]``)."""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
