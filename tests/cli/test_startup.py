"""The start-up step of long-running commands: set-up garbage goes, the rest is frozen."""

from __future__ import annotations

import gc
import weakref

from lazarus.cli._startup import freeze_start_up


class _Node:
    def __init__(self) -> None:
        self.self = self  # a cycle: only the collector frees it


def test_freeze_start_up_collects_garbage_and_exempts_what_is_left() -> None:
    # Given a cycle nothing refers to any more, and one the process holds
    gone = _Node()
    gone_ref = weakref.ref(gone)
    del gone
    held = _Node()

    # When the command freezes its start-up state
    freeze_start_up()
    try:
        # Then the garbage was collected first, and what is held no collection walks again
        assert gone_ref() is None
        assert gc.get_freeze_count() > 0
        assert not any(o is held for o in gc.get_objects())
    finally:
        gc.unfreeze()
