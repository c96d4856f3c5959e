"""Finding a job deep inside a long wait list, in bounded steps.

A script that takes a job out of the wait list (``remove_job``, ``remove_repeatable``) finds
it by itself near either end of the list, or in a short list. Deeper inside a long one it
writes nothing and answers ``{WAIT_SEARCH, from, id}``: the library reads the list from
``from`` in pieces (:func:`find_waiting`) and calls again with the index where it saw the job
(``includes/enqueue.lua``'s ``wait_remove``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._connection import Client
    from . import Script

WAIT_SEARCH = -9
"""What a script answers, with where to look and what for, when its job may be deep inside a
long wait list."""
WAIT_SEARCH_WHOLE = -2
"""The index that asks the script to search the list whole: the last resort."""
WAIT_LOOKS = 20  # looks before the script searches the list whole
WAIT_PIECE = 10_000  # ids a read of the wait list returns: half a millisecond of Redis
WAIT_OVERLAP = 100  # jobs removed near the head between two reads move the rest back


async def call_searching_wait(
    script: Script, client: Client, wait: str, keys: Sequence[str], args: Sequence[Any]
) -> Any:
    """Call ``script``, which takes one more argument, where its job is in the wait list
    ``wait``, until it answers other than ``{WAIT_SEARCH, from, id}``.

    The script answers so only for a job in none of the queue's sets, which must be in the
    wait list: when the reads do not see it there (many jobs taken out near the head moved it
    back faster than they read), they read the list again from its head, and then the script
    searches the list whole, as it does for a job that moves away from each look in turn.
    Whatever the reads miss, the job's place never outlives it: an id left behind would be
    claimed again if a job were added under the same id."""
    at: Any = ""
    for _ in range(WAIT_LOOKS):
        reply = await script(client, keys, [*args, at])
        if not isinstance(reply, list) or int(reply[0]) != WAIT_SEARCH:
            return reply
        job_id, start = reply[2], int(reply[1])
        at = await find_waiting(client, wait, job_id, start)
        if at < 0 and start > 0:
            at = await find_waiting(client, wait, job_id, 0)
        if at < 0:
            break
    return await script(client, keys, [*args, WAIT_SEARCH_WHOLE])


async def find_waiting(client: Client, wait: str, job_id: Any, start: int) -> int:
    """The index of ``job_id`` in the wait list ``wait``, read from ``start`` in pieces of
    :data:`WAIT_PIECE`; -1 when it is not there."""
    forms = {job_id, job_id.decode() if isinstance(job_id, bytes) else job_id.encode()}
    while True:
        piece = await client.lrange(wait, start, start + WAIT_PIECE - 1)
        for form in forms:
            with contextlib.suppress(ValueError):
                return start + int(piece.index(form))
        if len(piece) < WAIT_PIECE:
            return -1
        start += WAIT_PIECE - WAIT_OVERLAP
