"""``python manage.py lazarus_worker``: the worker of the emails queue, until SIGTERM."""

import asyncio
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from lazarus import Worker

from ...jobs import send_welcome


class Command(BaseCommand):
    help = "Run the lazarus worker of the emails queue"

    def handle(self, *args: Any, **options: Any) -> None:
        async def serve() -> None:
            worker = Worker(
                "emails",
                send_welcome,
                connection=settings.LAZARUS_REDIS_URL,
                prefix=settings.LAZARUS_PREFIX,
                concurrency=10,
                dead_letter_queue="emails-dlq",
            )
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
            await stop.wait()
            await worker.close()

        asyncio.run(serve())
