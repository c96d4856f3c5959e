"""What a long-running command (``lazarus worker``, ``lazarus serve``) does once it has started.

A full collection of Python's garbage collector walks every object the process holds. The
modules, the processor and the app alone are tens of thousands of objects (77,000 with the
HTTP stack: 25 ms a collection), and a collection comes every so many thousand allocations,
so each one paused whatever jobs or requests were running. They live as long as the process:
they are moved out of the collector's reach once, at start-up.
"""

from __future__ import annotations

import gc


def freeze_start_up() -> None:
    """Collect what start-up left behind, then exempt everything left from later collections."""
    gc.collect()
    gc.freeze()
