"""The HTTP side: ``POST /messages`` (the producer), ``GET /health``, and the lazarus
dashboard and API (``/dashboard``, ``/queues/...``) from :func:`lazarus.http.create_app`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from lazarus import RedisUnavailableError
from lazarus.http import create_app as create_lazarus_app

from .payload import ForwardJob
from .service import Service

log = logging.getLogger("message_forward.http")


def create_app(service: Service) -> FastAPI:
    """The service's ASGI app; its lifespan starts and stops ``service``."""
    settings = service.settings
    lazarus_app = create_lazarus_app(
        connection=settings.redis_url, prefix=settings.prefix, token=settings.api_token,
        auth=settings.api_token is not None,
    )  # fmt: skip

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        # A mounted app's lifespan is not run by Starlette: run it here.
        async with lazarus_app.router.lifespan_context(lazarus_app):
            try:
                yield
            finally:
                await service.stop()

    app = FastAPI(title="message-forward", lifespan=lifespan)

    @app.post("/messages", status_code=202)
    async def enqueue(request: Request) -> Any:
        """Queue one :class:`ForwardJob` (camelCase JSON); 202 with the job's id."""
        body = await request.body()
        if len(body) > settings.max_payload_bytes:
            return _error(413, "payload_too_large",
                          f"the body has {len(body)} bytes; the limit is "
                          f"{settings.max_payload_bytes}")  # fmt: skip
        try:
            message = ForwardJob.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "body"
            return _error(422, "invalid_payload", f"{field}: {first['msg']}")
        try:
            job = await service.producer.send(message)
        except ValueError as exc:  # the stored form is over max_payload_bytes
            return _error(413, "payload_too_large", str(exc))
        except RedisUnavailableError as exc:
            log.warning("cannot queue message %s: %s", message.job_id(), exc)
            return _error(503, "redis_unavailable", str(exc))
        return {"jobId": job.id, "queue": settings.queue}

    @app.get("/health")
    async def health() -> Any:
        """Redis and the queue's statistics; 503 while Redis is unavailable."""
        report = await service.health()
        return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)

    app.mount("/", lazarus_app)  # the dashboard at /dashboard, the lazarus API beside it
    return app


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
