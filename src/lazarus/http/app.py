"""The app factory: the HTTP API, the dashboard, health and metrics in one ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from .. import __version__
from .._connection import Client, ready
from ..operators import Operators
from .auth import Credentials, Throttle
from .guard import DEFAULT_MAX_BODY, LOOPBACK_HOSTS, Guard, GuardSettings

if TYPE_CHECKING:
    from ..record import Record


def _credentials(token: str | None, tokens: Credentials | str | None) -> Credentials:
    if token is not None and not isinstance(token, str):
        raise TypeError(f"token: must be a str, not {type(token).__name__}")
    if tokens is not None and not isinstance(tokens, Credentials | str):
        raise TypeError(
            "tokens: must be Credentials or their 'name:role:token' text (entries separated "
            f"by commas or new lines), not {type(tokens).__name__}"
        )
    if isinstance(tokens, str):
        tokens = Credentials.parse(tokens)
    if token and tokens:
        raise ValueError("token, tokens: give one token or a set of named tokens, not both")
    if token:
        return Credentials.single(token)
    return tokens if tokens is not None else Credentials()


def create_app(
    *,
    connection: str | Client | None = None,
    prefix: str = "lazarus",
    token: str | None = None,
    tokens: Credentials | str | None = None,
    auth: bool = True,
    allowed_hosts: Iterable[str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    session_ttl: int = 12 * 3600,
    failed_tokens_per_minute: int = 10,
    docs: bool = False,
    dead_letter_queue: str | None = None,
    ojs_test_hooks: bool = False,
    record: str | None = None,
    drainers: Sequence[Any] = (),
    bulk_lease: float = 30.0,
) -> FastAPI:
    """Build the app.

    Every route but the liveness ``/health`` needs credentials: ``token`` (one token with
    every right) or ``tokens`` (named tokens with roles, :class:`~lazarus.http.auth.Credentials`
    or its ``name:role:token`` text), presented as ``Authorization: Bearer <token>`` or through
    the dashboard's sign-in. ``auth=False`` lets everyone in — for loopback demos and test
    suites only. ``allowed_hosts`` are the host names the ``Host`` header may carry (default:
    the loopback names; ``["*"]`` for any, behind a proxy that checks it). Bodies over
    ``max_body_bytes`` are refused before they are read; dashboard sessions last
    ``session_ttl`` seconds. A client address that presents more than
    ``failed_tokens_per_minute`` wrong tokens in a minute is refused (429) until the minute
    has passed. ``docs`` serves the interactive API documentation at ``/docs`` (it loads its
    scripts from a CDN; ``/openapi.json`` is served to viewers).

    ``record`` (a record URL, see docs/record.md) makes ``/api/v1/dead-letter`` answer from
    the record; ``drainers`` are coroutine functions ``f(stop_event)`` the app runs in the
    background while it serves (``lazarus serve`` passes the record exporter and webhook
    deliverer).

    The app's state holds its :class:`~lazarus.operators.Operators` (``app.state.ops``) and
    the bulk operations it runs in the background (``app.state.bulk``); both are closed when
    the app shuts down (its lifespan), which hands its running bulk operations over to the
    next server to look (:mod:`.operations`). A server holds each bulk operation under a
    lease of ``bulk_lease`` seconds, renewed six times a lease: a server killed while it ran
    one is taken over that much later.

    The Open Job Spec binding is served at ``/ojs`` (:mod:`lazarus.ojs`); its jobs that end
    in a dead letter go to ``dead_letter_queue`` (default ``ojs-dead-letter``), and
    ``ojs_test_hooks`` is for the conformance suite only."""
    from ..audit import AuditTrail
    from ..dashboard.views import router as dashboard_router
    from ..ojs import DEFAULT_DEAD_LETTER_QUEUE
    from ..ojs import mount as mount_ojs
    from . import dead_letter_v1
    from ._deps import GUARD_ERRORS, KnownQueryOnly
    from .api import install_error_handlers
    from .api import router as api_router
    from .operations import BulkOperations

    settings = _guard_settings(
        token, tokens, auth, allowed_hosts, max_body_bytes, failed_tokens_per_minute
    )
    if not 60 <= _int(session_ttl, "session_ttl") <= 30 * 86400:
        raise ValueError(f"session_ttl: must be 60 s to 30 days, not {session_ttl}")
    drainers = _drainers(drainers)
    ops = Operators(connection=connection, prefix=prefix)
    bulk = BulkOperations(ops, lease=bulk_lease)
    recorded = _open_record(record, ops)
    ojs_upkeep = None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        assert ojs_upkeep is not None
        # Before the upkeep and the first requests use it at once; with Redis away, the
        # server starts all the same (the guard tries again at the first request).
        with contextlib.suppress(Exception):
            await ready(ops.client)
        if recorded is not None:
            await recorded.check()  # refuse to start on a record behind this lazarus
        stop = asyncio.Event()
        background = [asyncio.create_task(drain(stop)) for drain in drainers]
        await bulk.open()  # resumes the bulk operations whose server stopped
        async with ojs_upkeep:
            yield
        stop.set()
        await asyncio.gather(*background, return_exceptions=True)
        await bulk.close()  # first: it gives up its operations' leases, for another server
        if recorded is not None:
            await recorded.close()
        await ops.close()

    app = FastAPI(
        title="lazarus",
        version=__version__,
        description="Queues and dead letters of lazarus: inspect, replay and purge.",
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url=None,
    )
    app.state.ops = ops
    app.state.bulk = bulk
    app.state.guard = settings
    app.state.audit = AuditTrail(ops.client, ops.prefix)
    app.state.session_ttl = session_ttl
    app.state.flash_key = secrets.token_bytes(32)
    app.state.record = recorded
    install_error_handlers(app)
    for router in (api_router, dead_letter_v1.router):
        app.include_router(router, responses=GUARD_ERRORS, dependencies=[KnownQueryOnly])
    app.include_router(dashboard_router)
    ojs_upkeep = mount_ojs(
        app, ops, dead_letter_queue=dead_letter_queue or DEFAULT_DEAD_LETTER_QUEUE,
        test_hooks=ojs_test_hooks,
    )  # fmt: skip
    app.add_middleware(Guard, settings=settings, audit=app.state.audit, client=ops.client)
    return app


def _guard_settings(
    token: str | None,
    tokens: Credentials | str | None,
    auth: bool,
    allowed_hosts: Iterable[str] | None,
    max_body_bytes: int,
    failed_tokens_per_minute: int,
) -> GuardSettings:
    credentials = _credentials(token, tokens)
    if auth and not credentials:
        raise ValueError(
            "token, tokens: give the app credentials, or pass auth=False for a server that "
            "only this machine can reach"
        )
    if not 1024 <= _int(max_body_bytes, "max_body_bytes") <= 1 << 30:
        raise ValueError(f"max_body_bytes: must be 1 KiB to 1 GiB, not {max_body_bytes}")
    if not 1 <= _int(failed_tokens_per_minute, "failed_tokens_per_minute") <= 100_000:
        raise ValueError(
            f"failed_tokens_per_minute: must be 1 to 100,000, not {failed_tokens_per_minute}"
        )
    hosts = LOOPBACK_HOSTS if allowed_hosts is None else _hosts(allowed_hosts)
    throttle = Throttle(limit=failed_tokens_per_minute, window=60.0)
    return GuardSettings(credentials, auth, hosts, max_body_bytes, throttle)


def _int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: must be an int, not {type(value).__name__}")
    return value


def _hosts(allowed_hosts: Iterable[str]) -> frozenset[str]:
    # A str is an iterable of str too: "example.com" would allow the hosts "e", "x", "a", ...
    if isinstance(allowed_hosts, str | bytes) or not isinstance(allowed_hosts, Iterable):
        one = isinstance(allowed_hosts, str) and allowed_hosts
        hint = f" (for one host: allowed_hosts=[{allowed_hosts!r}])" if one else ""
        kind = type(allowed_hosts).__name__
        raise TypeError(f"allowed_hosts: must be a collection of host names, not {kind}{hint}")
    hosts = list(allowed_hosts)
    for host in hosts:
        if not isinstance(host, str):
            raise TypeError(f"allowed_hosts: every host must be a str, not {host!r}")
        if not host.strip():
            raise ValueError(f"allowed_hosts: a host must not be blank, got {host!r}")
    if not hosts:
        raise ValueError("allowed_hosts: name at least one host, or ['*'] for any")
    return frozenset(h.strip().lower() for h in hosts)


def _drainers(drainers: Sequence[Any]) -> tuple[Any, ...]:
    if isinstance(drainers, str | bytes) or not isinstance(drainers, Iterable):
        raise TypeError(
            f"drainers: must be a sequence of coroutine functions, not {type(drainers).__name__}"
        )
    found = tuple(drainers)
    for drain in found:
        if not callable(drain):
            raise TypeError(f"drainers: every drainer must be callable, not {drain!r}")
    return found


def _open_record(url: str | None, ops: Operators) -> Record | None:
    if url is None:
        return None
    from ..record import Record

    return Record(url, connection=ops.client, prefix=ops.prefix)
