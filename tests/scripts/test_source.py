"""Scripts as Redis runs them: includes expanded once, the shared functions a script never
calls left out, and nothing it calls missing."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis.asyncio as aioredis

from lazarus import _scripts
from lazarus._scripts import _source
from lazarus._scripts._source import prune

from ..faults import has_functions

_COMMENTS = re.compile(r"--\[\[.*?\]\]|--[^\n]*", re.DOTALL)

SAMPLE = """\
-- helper(): not called, only named in this comment
local function helper()
  return 1
end

local function leaf(x)
  return x + 1
end

local function used(x)
  -- calls leaf
  return leaf(x)
end

local function unused()
  return used(2)
end

return used(1)
"""


def test_prune_keeps_what_the_script_reaches_and_drops_the_rest() -> None:
    pruned = prune(SAMPLE)

    defined = re.findall(r"^local function (\w+)", pruned, re.MULTILINE)
    assert defined == ["leaf", "used"]
    assert pruned.endswith("return used(1)\n")


@pytest.mark.parametrize("name", _scripts.NAMES)
def test_every_local_function_a_script_calls_is_defined_in_it(name: str) -> None:
    source = _scripts.load(name).source
    body = _COMMENTS.sub("", source)
    defined = set(re.findall(r"^local function (\w+)", source, re.MULTILINE))
    every = set()
    for path in resources.files("lazarus._scripts").joinpath("includes").iterdir():
        every |= set(re.findall(r"^local function (\w+)", path.read_text(), re.MULTILINE))
    called = set(re.findall(r"\b(\w+)\(", body)) & every
    assert called <= defined, f"{name} calls {sorted(called - defined)} but lost them"


async def test_every_script_compiles_on_the_server(raw: aioredis.Redis) -> None:
    functions = await has_functions(raw)
    for name in _scripts.NAMES:
        script = _scripts.load(name)
        assert await raw.script_load(script.source) == script.sha, name
        if functions:  # and as a function library (every master, on a cluster)
            await raw.function_load(script.library, replace=True)


@pytest.mark.parametrize("name", _scripts.NAMES)
def test_a_functions_constants_are_never_changed(name: str) -> None:
    # A library's top level runs once, at load: an upper-case table there is shared by every
    # call, so no call may change it (a lower-case one is set anew per call instead).
    library = _scripts.load(name).library
    top = library.split("local function run()")[0]
    code = _COMMENTS.sub("", library)
    for constant in re.findall(r"^local ([A-Z][A-Z0-9_]*) = \{", top, re.MULTILINE):
        changes = re.findall(
            rf"\b{constant}\s*\[[^\]]*\]\s*=(?!=)|table\.(?:insert|remove|sort)\(\s*{constant}\b",
            code,
        )
        assert not changes, f"{name} changes its constant {constant}: {changes}"


def test_a_value_an_include_keeps_per_call_is_set_on_one_line() -> None:
    raw = "--[[\n  s: a script\n]]\n-- @include x\nreturn 1\n"
    head = "local cache = {\n  a = 1,\n}\n"

    def read(relative: str) -> str:
        return head if relative == "includes/x.lua" else raw

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_source, "read", read)
        with pytest.raises(ValueError, match="one line"):
            _source.library(raw, "s")
        head = "local cache = {}\n"
        assert "  cache = {}\n  return run()" in _source.library(raw, "s")


def test_a_function_that_breaks_the_convention_is_refused() -> None:
    one_line = (
        "local function f(x) return x end\nlocal y = 1\nlocal function g()\n  return 2\nend\n"
    )

    with pytest.raises(ValueError, match="alone on a line"):
        prune(one_line)


# The functions that write a queue's delayed set and keep enqueue.lua's cache of its earliest
# due time (delayed_head) right; and the commands that write a sorted set or a key whole.
_DELAYED_KEEPERS = ("enqueue", "promote_now", "promote_delayed")
_WRITE = re.compile(
    r"redis\.call\('(?:ZADD|ZREM|ZINCRBY|ZPOPMIN|ZPOPMAX|ZREMRANGEBYSCORE|ZREMRANGEBYRANK|"
    r"ZREMRANGEBYLEX|ZUNIONSTORE|ZINTERSTORE|ZDIFFSTORE|ZRANGESTORE|DEL|UNLINK|RENAME|"
    r"RENAMENX|RESTORE|COPY|MOVE|SORT)',\s*([^,)]+)"
)
_KEEPER = re.compile(
    rf"^local function ({'|'.join(_DELAYED_KEEPERS)})\(.*?^end$", re.MULTILINE | re.DOTALL
)


@pytest.mark.parametrize("name", _scripts.NAMES)
def test_a_script_that_reads_the_cached_delayed_head_writes_delayed_sets_only_through_enqueue(
    name: str,
) -> None:
    # promote_delayed and next_due trust delayed_head, which only enqueue.lua's functions
    # keep; a script that calls them and writes a delayed set any other way could claim too
    # early or sleep past a due job.
    script = _scripts.load(name)
    code = _COMMENTS.sub("", script.source)
    if not re.search(r"(?<!function )\b(promote_delayed|next_due)\(", code):
        return
    delayed = {f"KEYS[{i}]" for i, key in script.header_keys.items() if key == "delayed"}
    written = [key.strip() for key in _WRITE.findall(_KEEPER.sub("", code))]
    assert [key for key in written if "delayed" in key or key in delayed] == []
