"""The queue and the processor: what a view adds and what the worker runs."""

from django.conf import settings

from lazarus import Job, Queue

emails = Queue("emails", connection=settings.LAZARUS_REDIS_URL, prefix=settings.LAZARUS_PREFIX)


async def send_welcome(job: Job) -> str:
    from asgiref.sync import sync_to_async
    from django.core.mail import send_mail

    await sync_to_async(send_mail)("Welcome", "...", None, [job.data["to"]])
    return f"sent to {job.data['to']}"
