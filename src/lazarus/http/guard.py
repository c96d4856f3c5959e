"""The checks every request passes before any route runs, as one ASGI middleware.

In order: the ``Host`` header must name an allowed host (no DNS rebinding); an unsafe method
(POST, PUT, PATCH, DELETE) must come from the server's own origin when a browser says where it
comes from (no cross-site forms, not even from another port of the same host); a body may not
exceed the limit (checked against ``Content-Length`` before anything is read, then while it is
read); and, outside the dashboard (which signs in with a session, see
:mod:`lazarus.dashboard.sessions`) and the liveness ``/health``, the request must carry a bearer
token of a role high enough for what it asks (:mod:`lazarus.http.auth`). Failed tokens are
throttled per client address.

Every response gets ``Cache-Control: no-store`` and ``nosniff``; API responses a
``Content-Security-Policy`` that allows nothing. Every unsafe request that reaches the app is
recorded in the audit trail (:mod:`lazarus.http.audit`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._connection import Client, ready
from ..audit import AuditTrail
from ..masking import payloads_visible
from .audit import summarize
from .auth import ANONYMOUS, Credentials, Principal, Role, Throttle

log = logging.getLogger("lazarus.http")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
DEFAULT_MAX_BODY = 1 << 20
API_CSP = "default-src 'none'; frame-ancestors 'none'"

# Routes anyone may reach: liveness, the way into the dashboard, and its stylesheet.
PUBLIC = re.compile(r"^/(health|dashboard/login|dashboard/static/[^/]+)?/?$")
# The dashboard checks its session in its route classes (lazarus.dashboard.routing).
DASHBOARD = re.compile(r"^/dashboard(/|$)")
# What only an admin may do, whatever the method: the audit trail, webhooks, credentials.
ADMIN_ALWAYS = re.compile(r"^/api/(v1/)?(audit|webhooks|tokens)(/|$)")
# What only an admin may change (reading is a viewer's right): policies, rules, alerts.
ADMIN_CHANGES = re.compile(r"/(retention|redrive|rules|alerts|policy)(/|$)")
# Query parameters that search payloads: a viewer without payloads may not use them.
PAYLOAD_QUERIES = frozenset({"payload_contains", "args"})


def required_role(method: str, path: str) -> Role:
    """The lowest role that may make this request."""
    if ADMIN_ALWAYS.search(path):
        return Role.ADMIN
    if method in SAFE_METHODS:
        return Role.VIEWER
    if ADMIN_CHANGES.search(path):
        return Role.ADMIN
    return Role.OPERATOR


@dataclasses.dataclass
class GuardSettings:
    """How the guard checks requests. ``credentials`` empty with ``auth`` on refuses every
    authenticated route; ``auth`` off lets every request in as :data:`ANONYMOUS` (loopback
    demos and test suites only). ``allowed_hosts`` are host names without port, ``*`` for
    any."""

    credentials: Credentials
    auth: bool = True
    allowed_hosts: frozenset[str] = LOOPBACK_HOSTS
    max_body_bytes: int = DEFAULT_MAX_BODY
    throttle: Throttle = dataclasses.field(default_factory=Throttle)


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class Guard:
    """The middleware; see the module's docstring."""

    def __init__(
        self, app: ASGIApp, settings: GuardSettings, audit: AuditTrail, client: Client
    ) -> None:
        self.app = app
        self.settings = settings
        self.audit = audit
        self.client = client
        self._ready = False  # the client is ready for requests at once (_connection.ready)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        method, path = scope["method"], scope["path"]
        scope.setdefault("state", {})
        refusal = self._refusal(scope, headers, method, path)
        principal: Principal | None = scope["state"].get("principal")
        if refusal is not None:
            status, code, message, extra = refusal
            await _error(send, status, code, message, extra)
            if self._audited(method, path):
                await self.audit.record(summarize(scope, principal, status, b"", b""))
            return
        if not self._ready:
            try:
                await ready(self.client)
                self._ready = True
            except Exception as exc:  # Redis away: the route says so as it always has
                log.debug("client not ready yet: %s", exc)
        token = payloads_visible.set(principal is None or principal.payloads)
        try:
            await self._call(scope, receive, send, method, path)
        finally:
            payloads_visible.reset(token)

    @staticmethod
    def _audited(method: str, path: str) -> bool:
        return method not in SAFE_METHODS and not PUBLIC.match(path)

    def _refusal(
        self, scope: Scope, headers: Headers, method: str, path: str
    ) -> tuple[int, str, str, dict[str, str]] | None:
        settings = self.settings
        host = _host_name(headers.get("host", ""))
        if "*" not in settings.allowed_hosts and host not in settings.allowed_hosts:
            return 421, "misdirected_request", f"host {host!r} is not served here", {}
        if method not in SAFE_METHODS:
            site = headers.get("sec-fetch-site")
            origin = headers.get("origin")
            expected = {f"http://{headers.get('host', '')}", f"https://{headers.get('host', '')}"}
            if (site is not None and site not in ("same-origin", "none")) or (
                origin is not None and origin not in expected
            ):
                return 403, "cross_origin", "requests from another origin may not change state", {}
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > settings.max_body_bytes):
            return (
                413,
                "body_too_large",
                f"bodies over {settings.max_body_bytes} bytes are refused",
                {},
            )
        if PUBLIC.match(path) or DASHBOARD.match(path):
            return None
        return self._authorize(scope, headers, method, path)

    def _authorize(
        self, scope: Scope, headers: Headers, method: str, path: str
    ) -> tuple[int, str, str, dict[str, str]] | None:
        settings = self.settings
        if not settings.auth:
            scope["state"]["principal"] = ANONYMOUS
            return None
        client = _client(scope)
        wait = settings.throttle.retry_after(client)
        if wait:
            return (
                429,
                "too_many_attempts",
                "too many failed tokens; try again later",
                {"Retry-After": str(wait)},
            )
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        principal = (
            settings.credentials.authenticate(presented.strip())
            if scheme.lower() == "bearer"
            else None
        )
        if principal is None:
            if presented:
                settings.throttle.failed(client)
            message = "a valid 'Authorization: Bearer <token>' header is required"
            return 401, "unauthorized", message, {"WWW-Authenticate": "Bearer"}
        scope["state"]["principal"] = principal
        needed = required_role(method, path)
        if not principal.may(needed):
            return (
                403,
                "forbidden",
                f"this needs the {needed} role; {principal.name!r} is {principal.role}",
                {},
            )
        if not principal.payloads and PAYLOAD_QUERIES & _query_names(scope):
            return 403, "forbidden", "searching payloads needs a credential that may read them", {}
        return None

    async def _call(
        self, scope: Scope, receive: Receive, send: Send, method: str, path: str
    ) -> None:
        exchange = _Exchange(receive, send, self.settings.max_body_bytes, not DASHBOARD.match(path))
        await self.app(scope, exchange.receive, exchange.send)
        if self._audited(method, path):
            principal = scope.get("state", {}).get("principal")
            reply = bytes(exchange.reply) if exchange.is_json else b""
            entry = summarize(scope, principal, exchange.status, bytes(exchange.body), reply)
            await self.audit.record(entry)


class _Exchange:
    """One request's body and response as they pass: the body's size is capped, the start of
    each is kept for the audit trail, and the security headers are added."""

    KEEP_BODY = 4096
    KEEP_REPLY = 16384

    def __init__(self, receive: Receive, send: Send, limit: int, api: bool) -> None:
        self._receive, self._send = receive, send
        self.limit, self.api = limit, api
        self.too_large = f"bodies over {limit} bytes are refused"
        self.seen = 0
        self.body = bytearray()
        self.reply = bytearray()
        self.started = False
        self.refused = False
        self.status = 0
        self.is_json = False

    async def receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            self.seen += len(chunk)
            if self.seen > self.limit:
                # Answer now, and tell the app the client went away: whatever it does next
                # goes nowhere (send drops it).
                self.refused = True
                if not self.started:
                    await _error(self._send, 413, "body_too_large", self.too_large, {})
                    self.started, self.status = True, 413
                return {"type": "http.disconnect"}
            self.body.extend(chunk[: max(0, self.KEEP_BODY - len(self.body))])
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.started, self.status = True, message["status"]
            raw = list(message.get("headers", []))
            names = {name.lower() for name, _ in raw}
            self.is_json = any(
                n.lower() == b"content-type" and v.startswith(b"application/json") for n, v in raw
            )
            for name, value in _extra_headers(self.api).items():
                if name.encode() not in names:
                    raw.append((name.encode(), value.encode()))
            message = {**message, "headers": raw}
        elif message["type"] == "http.response.body" and self.is_json:
            self.reply.extend(message.get("body", b"")[: max(0, self.KEEP_REPLY - len(self.reply))])
        await self._send(message)


def _query_names(scope: Scope) -> set[str]:
    from urllib.parse import parse_qsl

    raw = scope.get("query_string", b"").decode("latin-1")
    return {name for name, _ in parse_qsl(raw, keep_blank_values=True)}


def _extra_headers(api: bool) -> dict[str, str]:
    headers = {"cache-control": "no-store", "x-content-type-options": "nosniff"}
    if api:
        headers["content-security-policy"] = API_CSP
    return headers


async def _error(send: Send, status: int, code: str, message: str, extra: dict[str, str]) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((name.lower().encode(), value.encode()) for name, value in _extra_headers(True).items()),
        *((name.lower().encode(), value.encode()) for name, value in extra.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
