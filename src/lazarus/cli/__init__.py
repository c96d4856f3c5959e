"""The ``lazarus`` command line: run workers and a local Redis.

Environment variables are read here and nowhere else in lazarus.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
