"""The JSON API: queues, jobs, dead letters (OJS binding), health and metrics."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

router = APIRouter()


def install_error_handlers(app: FastAPI) -> None:
    """Map lazarus errors to JSON error responses."""
