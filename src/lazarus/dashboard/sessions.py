"""Dashboard sessions, kept in Redis: a random id in the browser, who signed in on the server.

Signing in with a token creates a session: a random id (the ``lazarus_session`` cookie) and,
under ``<prefix>:session:<SHA-256 of the id>``, the principal's name and role and the session's
own CSRF value, with an expiry. Signing in again replaces the session (a new id); signing out
deletes it at once. A session ends too when its credential is no longer configured or has
another role. Without authentication (``auth=False``) every browser gets an anonymous session
on its first page, so forms are still bound to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import time
from typing import Any

from starlette.requests import Request

from .._keys import session_key
from ..http.auth import ANONYMOUS, Principal
from ..http.guard import GuardSettings
from ..operators import Operators

SESSION_TTL_SECONDS = 12 * 3600


@dataclasses.dataclass(frozen=True)
class Session:
    """A signed-in browser: its cookie value ``sid``, who it is, and its CSRF value."""

    sid: str
    principal: Principal
    csrf: str


def _key(ops: Operators, sid: str) -> str:
    return session_key(ops.prefix, hashlib.sha256(sid.encode("utf-8", "replace")).hexdigest())


def settings_of(request: Request) -> GuardSettings:
    """The app's :class:`~lazarus.http.guard.GuardSettings`."""
    settings: GuardSettings = request.app.state.guard
    return settings


async def create(request: Request, principal: Principal) -> Session:
    """A new session for ``principal``."""
    ops: Operators = request.app.state.ops
    session = Session(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32))
    key = _key(ops, session.sid)
    fields: dict[str, str] = {
        "name": principal.name,
        "role": str(principal.role),
        "csrf": session.csrf,
        "payloads": str(int(principal.payloads)),
        "created": str(int(time.time() * 1000)),
    }
    async with ops.client.pipeline(transaction=True) as pipe:
        pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
        pipe.expire(key, request.app.state.session_ttl)
        await pipe.execute()
    return session


async def load(request: Request, sid: str) -> Session | None:
    """The live session whose id is ``sid``, else ``None``."""
    if not sid or len(sid) > 128:
        return None
    ops: Operators = request.app.state.ops
    fields: dict[Any, Any] = await ops.client.hgetall(_key(ops, sid))
    if not fields:
        return None
    settings = settings_of(request)
    if not settings.auth:
        principal: Principal | None = ANONYMOUS
    else:
        principal = settings.credentials.named(fields.get("name", ""))
        if principal is None or str(principal.role) != fields.get("role"):
            await revoke(request, sid)
            return None
    assert principal is not None
    return Session(sid, principal, fields.get("csrf", ""))


async def revoke(request: Request, sid: str) -> None:
    """End the session ``sid`` now."""
    ops: Operators = request.app.state.ops
    await ops.client.delete(_key(ops, sid))
