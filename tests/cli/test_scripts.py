"""``lazarus scripts``: the function libraries lazarus loads into Redis, and the pruning of
other versions' after an upgrade."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from lazarus import Queue, _scripts
from lazarus.cli import main

from ..faults import has_functions

# A library as another version of lazarus would have left it: the same name but its digest.
OLD = "lazarus_add_jobs_0123456789abcdef"
OLD_LIBRARY = (
    f"#!lua name={OLD}\nredis.register_function('{OLD}', function(keys, args) return 1 end)\n"
)


async def lazarus(redis_url: str, *args: str) -> Result:
    runner = CliRunner(env={"COLUMNS": "200"})
    return await asyncio.to_thread(runner.invoke, main, [*args, "--redis-url", redis_url])


async def held(raw: Any, library: str) -> bool:
    """Whether the server (any master of a cluster) holds ``library``."""
    found = await raw.function_list(library=library)
    return any(found.values()) if isinstance(found, dict) else bool(found)


@pytest.fixture
async def functions(raw: Any) -> None:
    if not await has_functions(raw):
        pytest.skip("Redis 6.2 has no functions")


@pytest.mark.usefixtures("functions")
async def test_prune_deletes_other_versions_libraries_and_keeps_this_ones(
    raw: Any, redis_url: str, queue: Queue
) -> None:
    # Given this version's add_jobs library (loaded by an add) and another version's
    await queue.add("a", {})
    await raw.function_load(OLD_LIBRARY, replace=True)
    current = _scripts.load("add_jobs").function

    # Then both are listed, each with whose it is
    listed = await lazarus(redis_url, "scripts", "list", "--json")
    assert listed.exit_code == 0, listed.output
    libraries = {e["name"]: e["current"] for e in json.loads(listed.output)["libraries"]}
    assert (libraries[current], libraries[OLD]) == (True, False)

    # When a dry run prunes, it names the old one and deletes nothing
    dry = await lazarus(redis_url, "scripts", "prune", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"would delete {OLD}" in dry.output
    assert await held(raw, OLD)

    # When pruning, the old library goes and this version's stays
    pruned = await lazarus(redis_url, "scripts", "prune", "--json")
    assert pruned.exit_code == 0, pruned.output
    assert OLD in json.loads(pruned.output)["deleted"]
    assert current not in json.loads(pruned.output)["deleted"]
    assert not await held(raw, OLD)
    assert await held(raw, current)

    # And a version whose library was pruned loads it again at its next call
    await raw.function_delete(current)
    await queue.add("b", {})
    assert (await queue.get_job_counts())["waiting"] == 2
