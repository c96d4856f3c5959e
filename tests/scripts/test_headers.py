"""Every script's header documents exactly the KEYS and ARGV its body uses."""

from __future__ import annotations

import re

import pytest

from lazarus import _scripts
from lazarus._keys import QueueKeys

_USED = re.compile(r"(KEYS|ARGV)\[(\d+)\]")
GROUP_NAMES = [
    "wait",
    "prioritized",
    "pc",
    "delayed",
    "active",
    "leases",
    "marker",
    "meta",
    "events",
    "job_prefix",
]


@pytest.mark.parametrize("name", _scripts.NAMES)
def test_header_declares_every_key_and_argument_the_body_uses(name: str) -> None:
    script = _scripts.load(name)
    body = script.source.split("]]", 1)[1]

    used = {(kind, int(index)) for kind, index in _USED.findall(body)}

    for kind, index in used:
        declared = script.header_keys if kind == "KEYS" else script.header_args
        assert index in declared, f"{name}: {kind}[{index}] is used but not in the header"


@pytest.mark.parametrize("name", _scripts.NAMES)
def test_header_numbers_keys_and_arguments_without_gaps(name: str) -> None:
    script = _scripts.load(name)
    for declared in (script.header_keys, script.header_args):
        assert sorted(declared) == list(range(1, len(declared) + 1)), name


@pytest.mark.parametrize("name", _scripts.NAMES)
def test_queue_key_groups_follow_the_python_order(name: str) -> None:
    script = _scripts.load(name)
    keys = script.header_keys
    for first in (i for i, n in keys.items() if n in ("wait", "dlq_wait")):
        names = [keys.get(first + j, "") for j in range(10)]
        if names[0] == "dlq_wait" and names[1] != "dlq_prioritized":
            continue  # a lone dead letter queue list, not a group
        bare = [n.removeprefix("dlq_") for n in names]
        if bare[1] != "prioritized":
            continue
        assert bare == GROUP_NAMES, f"{name}: KEYS[{first}..] are not in QueueKeys.group order"
    assert [k.split(":")[-1] for k in QueueKeys("p", "q").group[:-1]] == GROUP_NAMES[:-1]


def test_every_script_file_is_listed_and_loads() -> None:
    from importlib import resources

    files = {
        p.name[:-4]
        for p in resources.files("lazarus._scripts").iterdir()
        if p.name.endswith(".lua")
    }
    assert files == set(_scripts.NAMES)
    for name in _scripts.NAMES:
        assert "-- @include" not in _scripts.load(name).source
