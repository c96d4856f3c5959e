"""Fresh job ids: random version 4 UUIDs, made ahead in batches, never handed out twice."""

from __future__ import annotations

import os
import threading
import uuid

from lazarus._keys import new_id


def test_ids_are_version_4_uuids_in_hex() -> None:
    for made in [new_id() for _ in range(300)]:  # more than one batch
        parsed = uuid.UUID(made)
        assert (parsed.version, parsed.variant, made) == (4, uuid.RFC_4122, parsed.hex)


def test_threads_never_get_the_same_id() -> None:
    made: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(len(made))

    def make(into: list[str]) -> None:
        start.wait()
        into.extend(new_id() for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(into,)) for into in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [made_id for into in made for made_id in into]
    assert len(every) == 20_000 and len(set(every)) == 20_000


def test_a_forked_child_does_not_reuse_its_parents_ids() -> None:
    new_id()  # the parent now holds ids made ahead
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        os.write(write, "".join(new_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    childs = {text[i : i + 32] for i in range(0, len(text), 32)}
    assert status == 0 and len(childs) == 8
    parents = {new_id() for _ in range(300)}
    assert not childs & parents
