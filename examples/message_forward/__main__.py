"""``python -m examples.message_forward``: run the service.

Redis comes from ``LAZARUS_REDIS_URL``; unset, the service starts a private redis-server of
its own (``lazarus.embedded``) for as long as it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterator

import uvicorn

from lazarus.embedded import EmbeddedRedis

from .app import create_app
from .service import RedisDownError, Service
from .settings import Settings


@contextlib.contextmanager
def redis_url() -> Iterator[str | None]:
    """The configured Redis, or an embedded one when none is configured."""
    settings = Settings.from_env()
    if settings.redis_url is not None:
        yield settings.redis_url
        return
    with EmbeddedRedis() as server:
        print(f"LAZARUS_REDIS_URL is not set: using an embedded Redis at {server.url}")
        yield server.url


async def serve(host: str, port: int, url: str | None) -> None:
    service = Service(Settings(redis_url=url))
    await service.check_redis()  # fail fast, before the port opens
    config = uvicorn.Config(create_app(service), host=host, port=port, log_level="info")
    print(f"message-forward on http://{host}:{port}: POST /messages, GET /health, "
          f"dashboard at http://{host}:{port}/dashboard", flush=True)  # fmt: skip
    await uvicorn.Server(config).serve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.message_forward")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        with redis_url() as url:
            asyncio.run(serve(args.host, args.port, url))
    except RedisDownError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
