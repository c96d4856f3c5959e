"""examples/ojs_client.py against a real lazarus serve: a remote OJS worker and an in-process
Worker share one queue, and every failed job ends as a dead letter under its own id."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from .conftest import DEAD_LETTER_QUEUE, OjsServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ojs_client.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ojs_client_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_remote_and_in_process_workers_share_a_queue_and_its_dead_letters(
    ojs_server: OjsServer, redis_url: str
) -> None:
    example = load_example()

    summary = await example.run(ojs_server.url, redis_url, ojs_server.prefix, DEAD_LETTER_QUEUE, 10)

    assert (summary["remote"], summary["in_process"]) == (5, 5)
    assert (summary["completed"], summary["discarded"]) == (5, 5)
    assert summary["dead_letters"] == summary["odd_ids"]
