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
WAIT_LOOKS = 20  # looks before the script searches the list whole, as a last resort
WAIT_PIECE = 10_000  # ids a read of the wait list returns: half a millisecond of Redis
WAIT_OVERLAP = 100  # jobs removed near the head between two reads move the rest back


async def call_searching_wait(
    script: Script, client: Client, wait: str, keys: Sequence[str], args: Sequence[Any]
) -> Any:
    """Call ``script``, which takes one more argument, where its job is in the wait list
    ``wait``, until it answers other than ``{WAIT_SEARCH, from, id}``. A job that moves
    away from each look in turn is searched for whole at last."""
    at: Any = ""
    for _ in range(WAIT_LOOKS):
        reply = await script(client, keys, [*args, at])
        if not isinstance(reply, list) or int(reply[0]) != WAIT_SEARCH:
            return reply
        at = await find_waiting(client, wait, reply[2], int(reply[1]))
    return await script(client, keys, [*args, -2])


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
