"""What became of a redriver's replays, and the circuit breakers and gates of conditional
rules that depend on it.

A replay succeeded when its dead letter became ``resolved`` or its new job completed (or is
gone without coming back); it failed when the new job came back to the dead letter queue
(the dead letter is ``pending`` again with a higher replay count, or a new dead letter names
the new job as its original) or ended in the source queue's ``failed`` set. Each outcome is
counted once, by the redriver that replayed, in the dead letter queue's meta hash
(``count:redrive:succeeded`` / ``count:redrive:failed``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import urllib.request
from collections import OrderedDict
from typing import TYPE_CHECKING

from .._keys import QueueKeys
from .rules import RedriveRule

if TYPE_CHECKING:
    from .._connection import Client
MAX_TRACKED = 1_000  # replays a redriver follows at once; the oldest are dropped beyond
GATE_TIMEOUT = 2.0  # seconds a health URL may take to answer


@dataclasses.dataclass(frozen=True)
class Replay:
    """One replay a redriver made."""

    dead_letter_id: str
    new_job_id: str
    queue: str
    rule: str
    replay_count: int


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failed replays; after ``cooldown`` ms it lets one
    replay through (half-open), and its success closes it again."""

    def __init__(self, threshold: int, cooldown: int) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self.failures = 0
        self.opened_at: int | None = None
        self.trial = False

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    def allows(self, now: int) -> bool:
        """Whether a replay may go now (taking the half-open trial if it is due)."""
        if self.opened_at is None:
            return True
        if not self.trial and now - self.opened_at >= self.cooldown:
            self.trial = True
            return True
        return False

    def record(self, success: bool, now: int) -> None:
        if success:
            self.failures, self.opened_at, self.trial = 0, None, False
            return
        self.failures += 1
        if self.threshold and (self.failures >= self.threshold or self.trial):
            self.opened_at, self.trial = now, False


async def gate_open(rule: RedriveRule) -> bool:
    """Whether a conditional rule's gate (callable or health URL) holds now; a gate that
    raises or a URL that does not answer 2xx is closed."""
    try:
        if rule.gate is not None:
            verdict = rule.gate()
            if inspect.isawaitable(verdict):
                verdict = await verdict
            return bool(verdict)
        if rule.health_url is not None:
            return await asyncio.to_thread(_healthy, rule.health_url)
    except Exception:
        return False
    return True


def _healthy(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=GATE_TIMEOUT) as response:
        return 200 <= int(response.status) < 300


class Tracker:
    """The replays one redriver made whose outcome it has not seen yet."""

    def __init__(self) -> None:
        self.pending: OrderedDict[str, Replay] = OrderedDict()

    def add(self, replay: Replay) -> None:
        self.pending[replay.new_job_id] = replay
        while len(self.pending) > MAX_TRACKED:
            self.pending.popitem(last=False)

    async def settle(self, client: Client, dlq: QueueKeys) -> list[tuple[Replay, bool]]:
        """The tracked replays whose outcome is known now (forgotten here, counted in Redis)."""
        replays = list(self.pending.values())
        if not replays:
            return []
        async with client.pipeline(transaction=False) as pipe:
            for r in replays:
                target = QueueKeys(dlq.prefix, r.queue)
                pipe.hmget(dlq.job(r.dead_letter_id), "dlq:status", "dlq:replayCount")
                pipe.hexists(dlq.dl_origins, r.new_job_id)
                pipe.zscore(target.completed, r.new_job_id)
                pipe.zscore(target.failed, r.new_job_id)
                pipe.exists(target.job(r.new_job_id))
            replies = await pipe.execute()
        settled: list[tuple[Replay, bool]] = []
        for i, r in enumerate(replays):
            (status, count), came_back, completed, failed, exists = replies[i * 5 : i * 5 + 5]
            outcome = _outcome(r, _text(status), int(count or 0), came_back, completed, failed,
                               exists)  # fmt: skip
            if outcome is not None:
                settled.append((r, outcome))
                del self.pending[r.new_job_id]
        if settled:
            succeeded = sum(1 for _, ok in settled if ok)
            async with client.pipeline(transaction=False) as pipe:
                pipe.hincrby(dlq.meta, "count:redrive:succeeded", succeeded)
                pipe.hincrby(dlq.meta, "count:redrive:failed", len(settled) - succeeded)
                await pipe.execute()
        return settled


def _outcome(
    r: Replay, status: str, count: int, came_back: object, completed: object, failed: object,
    exists: object,
) -> bool | None:  # fmt: skip
    """True (succeeded), False (failed) or None (not known yet) for one replay."""
    if status == "resolved":
        return True
    if status and status != "processing" and count > r.replay_count:
        return False
    if came_back or failed is not None:
        return False
    if completed is not None:
        return True
    if status == "processing" or exists:
        return None
    # The new job is gone and never came back: it was removed on completion.
    return True if not status else None


def _text(value: object) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)
