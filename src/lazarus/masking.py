"""Payloads hidden from readers who may not see them.

The HTTP guard (:mod:`lazarus.http.guard`) sets :data:`payloads_visible` for each request
from its credential; every response field that carries a payload, a return value or job
arguments — in the API, the record's routes and Open Job Spec — goes through :func:`masked`.
Outside a request (the library, the CLI) payloads are always visible.
"""

from __future__ import annotations

import contextvars
from typing import Any

MASKED = "[masked: this credential may not read payloads]"

payloads_visible: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "lazarus_payloads_visible", default=True
)
"""Whether the request being served may read payloads."""


def masked(value: Any) -> Any:
    """``value``, or :data:`MASKED` when the current request may not read payloads."""
    return value if payloads_visible.get() else MASKED
