"""The lifecycle methods of :class:`~lazarus.Queue` on its dead letters: status changes
(the general one, and an operator's flag, reopen and archive), the replay limit, and settling
dead letters whose replayed job will never report back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._connection import reports_unavailable
from .._keys import QueueKeys
from ..errors import JobStateError
from . import bulk, lifecycle
from .filters import DeadLetterStatus

if TYPE_CHECKING:
    from .._connection import Client
DEFAULT_MAX_REPLAYS = 5  # as DEFAULT_MAX_REPLAYS in includes/dead_letter.lua
MAX_REPLAYS_FIELD = "maxReplays"  # in the dead letter queue's meta hash


class DeadLetterActionsMixin:
    """Status changes of a dead letter queue's dead letters."""

    name: str
    keys: QueueKeys
    max_events: int
    _client: Client

    @reports_unavailable
    async def set_dead_letter_status(
        self,
        dead_letter_id: str,
        status: DeadLetterStatus | str,
        *,
        actor: str,
        note: str | None = None,
        expect: Iterable[DeadLetterStatus | str] | None = None,
    ) -> bool:
        """Move a dead letter to ``status``, recorded in its timeline with ``actor``
        (``redriver``, ``policy`` or ``operator:<name>``) and ``note``.

        With ``expect``, only a dead letter currently in one of those statuses moves: returns
        ``False`` (and changes nothing) otherwise, so rivals deciding at once never both win.
        Returns ``True`` when the change was recorded. Raises :class:`JobNotFoundError` when
        there is no such dead letter, :class:`JobStateError` when a worker of this queue holds
        it, and ``ValueError``/``TypeError`` naming the field for bad arguments.

        Example::

            await dlq.set_dead_letter_status(dl_id, "manual", actor="operator:ada",
                                             note="needs the billing team", expect=["pending"])
        """
        changed, _ = await lifecycle.set_status(
            self._client, self.keys, self.max_events, dead_letter_id, status,
            actor=actor, note=note, expect=expect,
        )  # fmt: skip
        return changed

    async def _act(
        self, dead_letter_id: str, status: str, expect: tuple[str, ...], actor: str,
        note: str | None,
    ) -> None:  # fmt: skip
        changed, current = await lifecycle.set_status(
            self._client, self.keys, self.max_events, dead_letter_id, status,
            actor=actor, note=note, expect=expect,
        )  # fmt: skip
        if not changed:
            raise JobStateError(
                f"dead letter {dead_letter_id!r} is {current}: it cannot become {status}"
            )

    @reports_unavailable
    async def flag_dead_letter(
        self, dead_letter_id: str, *, actor: str, note: str | None = None
    ) -> None:
        """Flag a ``pending`` or ``failed`` dead letter for a human: it becomes ``manual``
        (still live), out of reach of automatic redrive. Raises :class:`JobStateError` from
        any other status."""
        await self._act(dead_letter_id, "manual", ("pending", "failed"), actor, note)

    @reports_unavailable
    async def reopen_dead_letter(
        self, dead_letter_id: str, *, actor: str, note: str | None = None
    ) -> None:
        """Put a ``manual``, ``failed``, ``archived`` or ``resolved`` dead letter back to
        ``pending``, waiting for a decision again. Raises :class:`JobStateError` from
        ``processing`` (its replayed job decides) or ``pending``."""
        await self._act(
            dead_letter_id, "pending", ("manual", "failed", "archived", "resolved"), actor, note
        )

    @reports_unavailable
    async def archive_dead_letter(
        self, dead_letter_id: str, *, actor: str, note: str | None = None
    ) -> None:
        """Archive a dead letter (``pending``, ``manual``, ``failed`` or ``resolved``): kept,
        with its history and ``note``, but no longer live. Raises :class:`JobStateError` from
        ``processing`` or ``archived``."""
        await self._act(
            dead_letter_id, "archived", ("pending", "manual", "failed", "resolved"), actor, note
        )

    @reports_unavailable
    async def set_max_replays(self, max_replays: int) -> None:
        """How many replays a dead letter of this queue gets: when its replayed job fails for
        good and it had been replayed ``max_replays`` times, it becomes ``failed`` instead of
        ``pending``. Stored in Redis (every process sees it); the default is 5."""
        if isinstance(max_replays, bool) or not isinstance(max_replays, int):
            raise TypeError(f"max_replays must be an int, not {type(max_replays).__name__}")
        if max_replays < 1:
            raise ValueError(f"max_replays must be >= 1, got {max_replays}")
        await self._client.hset(self.keys.meta, MAX_REPLAYS_FIELD, max_replays)

    @reports_unavailable
    async def get_max_replays(self) -> int:
        """The replay limit of this queue's dead letters (see :meth:`set_max_replays`)."""
        raw = await self._client.hget(self.keys.meta, MAX_REPLAYS_FIELD)
        return DEFAULT_MAX_REPLAYS if raw is None else int(raw)

    @reports_unavailable
    async def settle_dead_letters(self, *, batch_size: int = bulk.DEFAULT_BATCH) -> int:
        """Settle ``processing`` dead letters whose replayed job will never report back, and
        return how many moved: back to ``pending`` when the job was removed or cleaned before
        it finished, or failed for good where no dead letter queue took it; ``resolved`` when
        it completed without resolving it. Safe to run at any time, from anywhere, as often as
        wanted; the redrive service runs it periodically, and workers sending to this queue
        settle a random sample at each stall sweep."""
        batch = bulk.check_batch(batch_size)
        return await lifecycle.settle(self._client, self.keys, self.max_events, batch)
