"""Fresh ids, made ahead in batches and never handed out twice: job ids (random version 4
UUIDs) and dead letter ids (112 random bits)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable

import pytest

from lazarus._ids import new_dead_letter_id, new_id

MAKERS = pytest.mark.parametrize("make", [new_id, new_dead_letter_id], ids=["job", "dead_letter"])


def test_ids_are_version_4_uuids_in_hex() -> None:
    for made in [new_id() for _ in range(300)]:  # more than one batch
        parsed = uuid.UUID(made)
        assert (parsed.version, parsed.variant, made) == (4, uuid.RFC_4122, parsed.hex)


def test_dead_letter_ids_are_28_hex_digits() -> None:
    made = [new_dead_letter_id() for _ in range(300)]
    assert all(len(one) == 28 and int(one, 16) >= 0 for one in made)
    assert len(set(made)) == 300


@MAKERS
def test_threads_never_get_the_same_id(make: Callable[[], str]) -> None:
    made: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(len(made))

    def fill(into: list[str]) -> None:
        start.wait()
        into.extend(make() for _ in range(5_000))

    threads = [threading.Thread(target=fill, args=(into,)) for into in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [made_id for into in made for made_id in into]
    assert len(every) == 20_000 and len(set(every)) == 20_000


@MAKERS
def test_a_forked_child_does_not_reuse_its_parents_ids(make: Callable[[], str]) -> None:
    make()  # the parent now holds ids made ahead
    size = len(make())
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        os.write(write, "".join(make() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    childs = {text[i : i + size] for i in range(0, len(text), size)}
    assert status == 0 and len(childs) == 8
    parents = {make() for _ in range(300)}
    assert not childs & parents
