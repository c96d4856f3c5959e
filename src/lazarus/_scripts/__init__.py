"""Loads the Lua scripts, expands their includes and calls them by EVALSHA.

Each ``<name>.lua`` here is one transition and opens with a header naming its ``KEYS[i]`` and
``ARGV[i]``; ``includes/`` holds shared local functions pulled in by ``-- @include <name>``
lines. Scripts are loaded once per process and called by EVALSHA, falling back to SCRIPT LOAD
when the server answers NOSCRIPT (after a restart or SCRIPT FLUSH).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

_INCLUDE = re.compile(r"^-- @include (\w+)\s*$", re.MULTILINE)
_HEADER_KEY = re.compile(r"^\s*KEYS\[(\d+)\]\s+(\w+)", re.MULTILINE)
_HEADER_ARG = re.compile(r"^\s*ARGV\[(\d+)\]\s+(\w+)", re.MULTILINE)


def _read(relative: str) -> str:
    return resources.files(__package__).joinpath(relative).read_text(encoding="utf-8")


def _expand(source: str, seen: set[str]) -> str:
    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return f"-- ({name} included above)"
        seen.add(name)
        return _expand(_read(f"includes/{name}.lua"), seen)

    return _INCLUDE.sub(include, source)


class Script:
    """One Lua transition: its expanded source, SHA1 and header."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.raw = _read(f"{name}.lua")
        self.source = _expand(self.raw, set())
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()
        header = self.raw.split("]]", 1)[0]
        self.header_keys = dict(_parse(_HEADER_KEY, header))
        self.header_args = dict(_parse(_HEADER_ARG, header))

    async def __call__(self, client: Redis, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)

    async def call_many(
        self, client: Redis, calls: Sequence[tuple[Sequence[str], Sequence[Any]]]
    ) -> list[Any]:
        """Run several calls in one pipeline, in order, on one connection.

        Only for idempotent calls: a call the server refused with NOSCRIPT is run again
        after loading the script.
        """
        async with client.pipeline(transaction=False) as pipe:
            for keys, args in calls:
                pipe.evalsha(self.sha, len(keys), *keys, *args)
            results = list(await pipe.execute(raise_on_error=False))
        for index, result in enumerate(results):
            if isinstance(result, NoScriptError):
                keys, args = calls[index]
                results[index] = await self(client, keys, args)
            elif isinstance(result, Exception):
                raise result
        return results


def _parse(pattern: re.Pattern[str], header: str) -> list[tuple[int, str]]:
    return [(int(index), name) for index, name in pattern.findall(header)]


@functools.cache
def load(name: str) -> Script:
    """The script called ``name`` (file ``<name>.lua``), read once per process."""
    return Script(name)


NAMES = (
    "add_jobs",
    "claim_jobs",
    "complete_job",
    "retry_job",
    "fail_job",
    "dead_letter_job",
    "sweep_stalled",
    "extend_locks",
    "pause_queue",
    "remove_job",
    "clean_jobs",
    "scan_dead_letters",
    "replay_dead_letters",
    "purge_dead_letters",
)
