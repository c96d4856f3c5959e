"""The Django example (examples/django_app, docs/frameworks.md): a view enqueues, and the
management command's worker runs the job until SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import django
import pytest
import redis.asyncio as aioredis

from lazarus import Queue

from .conftest import wait_until

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = "examples.django_app.settings"


@pytest.mark.timeout(90)
async def test_a_view_enqueues_and_the_management_command_runs_the_job(
    redis_url: str, prefix: str, raw: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the example project, configured for this test's Redis and key prefix
    monkeypatch.setenv("LAZARUS_REDIS_URL", redis_url)
    monkeypatch.setenv("LAZARUS_PREFIX", prefix)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", SETTINGS)
    django.setup()
    from django.test import AsyncClient

    # When a signup is posted to its async view
    response = await AsyncClient().post("/signup", {"email": "ada@example.com"})

    # Then the job waits in the emails queue
    assert response.status_code == 202
    job_id = response.json()["job"]
    assert await raw.lrange(f"{prefix}:{{emails}}:wait", 0, -1) == [job_id]

    # When `manage.py lazarus_worker` runs (as `python -m django`)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "lazarus_worker", "--settings", SETTINGS],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    queue = Queue("emails", connection=redis_url, prefix=prefix)
    try:
        # Then it runs the job, which sends the mail through Django
        async def completed() -> bool:
            job = await queue.get_job(job_id)
            return job is not None and job.return_value == "sent to ada@example.com"

        await wait_until(completed, timeout=30, message="the worker to complete the job")
    finally:
        await queue.close()
        # and stops cleanly on SIGTERM
        worker.send_signal(signal.SIGTERM)
        output, _ = await asyncio.to_thread(worker.communicate, timeout=30)
    assert worker.returncode == 0, output
