"""The redrive service: :class:`Redriver` applies redrive rules to the pending dead letters of
one dead letter queue, prunes it by its retention policy and evaluates its alert rules.

Each pass reads the ``pending`` index in bounded pages from where the last pass stopped,
decides with the first matching rule, claims what it will act on (several redrivers may run
at once: a dead letter is claimed by one at a time, and the claims of a redriver that died
expire), acts — replay, flag ``manual``, or ``failed`` past ``max_replays`` — and releases
its claims. Settling replays that will never report back, pruning and alerts are periodic
duties that one process at a time leads (an expiring lease), so redrivers running side by
side do not repeat them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from .._checks import at_least, positive_number
from .._connection import Client, now_ms
from .._supervision import Incident, describe, is_configuration_error, pause
from ..dead_letter import leadership
from ..errors import JobNotFoundError, JobStateError, NotADeadLetterError
from ..queue import Queue
from . import claims
from .alerts import DEFAULT_ALERTS, Alert, AlertBook, AlertRule
from .config import RulesFile
from .outcomes import CircuitBreaker, Replay, Tracker, gate_open
from .rules import Candidate, Decision, RedriveRule, check_rules, first_match

log = logging.getLogger("lazarus.redrive")
AlertHook = Callable[[Alert], "Awaitable[None] | None"]
MAX_PER_PASS = 1_000  # pending dead letters one pass reads at most; the next pass goes on


class RedriverStats:
    """What a redriver did since it started."""

    def __init__(self) -> None:
        self.passes = self.replayed = self.flagged = self.failed = self.lost = 0
        self.pruned = self.settled = 0


class Redriver:
    """Applies ``rules`` to the pending dead letters of queue ``dlq_name`` until closed.

    ``rules`` is a list of :class:`RedriveRule` (first match wins; unmatched dead letters are
    flagged ``manual``) or a :class:`RulesFile`, re-read when it changes. ``clock`` (ms)
    replaces the wall clock for the strategies' decisions, for tests.

    Example::

        redriver = Redriver("payments-dlq", [RedriveRule(DeadLetterFilter(
            error_type="TimeoutError"), strategy="backoff")], connection="redis://...")
        task = asyncio.create_task(redriver.run())
        ...
        await redriver.close()
    """

    def __init__(
        self,
        dlq_name: str,
        rules: Sequence[RedriveRule] | RulesFile = (),
        *,
        connection: str | Client | None = None,
        prefix: str = "lazarus",
        poll_interval: float = 30.0,
        batch_size: int = 100,
        claim_ms: int = 60_000,
        prune_interval: float = 300.0,
        settle_interval: float = 60.0,
        alert_rules: Sequence[AlertRule] = DEFAULT_ALERTS,
        alert_interval: float = 60.0,
        on_alert: AlertHook | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._file = rules if isinstance(rules, RulesFile) else None
        self._rules = self._file.current() if self._file else check_rules(rules)
        for field, value in (("poll_interval", poll_interval), ("prune_interval", prune_interval),
                             ("settle_interval", settle_interval),
                             ("alert_interval", alert_interval)):  # fmt: skip
            positive_number(value, field)
        at_least(batch_size, "batch_size")
        at_least(claim_ms, "claim_ms", 1_000)
        self.alert_rules = tuple(alert_rules)
        if not all(isinstance(r, AlertRule) for r in self.alert_rules):
            raise TypeError("alert_rules must be a list of AlertRule")
        self.queue = Queue(dlq_name, connection=connection, prefix=prefix)
        self.id = f"redriver-{uuid.uuid4().hex[:12]}"
        self.poll_interval, self.batch_size, self.claim_ms = poll_interval, batch_size, claim_ms
        self.prune_interval, self.alert_interval = prune_interval, alert_interval
        self.settle_interval = settle_interval
        self.on_alert = on_alert
        self.stats = RedriverStats()
        self._clock = clock or now_ms
        self._cursor = -math.inf
        self._tracker = Tracker()
        self._breakers: dict[str, CircuitBreaker] = {}
        self._alerts = AlertBook()
        self._due: dict[str, float] = {"settle": 0.0, "prune": 0.0, "alerts": 0.0}
        self._flagged: list[Candidate] = []  # flagged manual in the current pass
        self._stopping = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def rules(self) -> tuple[RedriveRule, ...]:
        """The rules in force."""
        return self._rules

    def set_rules(self, rules: Sequence[RedriveRule]) -> None:
        """Replace the rules (and stop following a rules file); the next pass follows them,
        no restart needed."""
        self._rules = check_rules(rules)
        self._file = None

    async def run(self) -> None:
        """Redrive until :meth:`close`; Redis errors are logged and retried with backoff."""
        self._stopping.clear()
        self._idle.clear()
        incident = Incident(log, f"redriver of {self.queue.name!r}")
        try:
            while not self._stopping.is_set():
                try:
                    await self.run_once()
                except Exception as exc:
                    if is_configuration_error(exc):
                        raise
                    incident.failed(exc)
                    await pause(self._stopping, incident.backoff())
                    continue
                incident.succeeded()
                await pause(self._stopping, self.poll_interval)
        finally:
            self._idle.set()

    async def close(self) -> None:
        """Stop after the current step, give up leases, and close the connection."""
        self._stopping.set()
        await self._idle.wait()
        for role in self._due:
            try:
                await leadership.release(self.queue.client, self.queue.keys, role, self.id)
            except Exception as exc:  # the lease expires by itself
                log.info("could not release the %s lease: %s", role, describe(exc))
        await self.queue.close()

    async def run_once(self) -> None:
        """One pass: outcomes of earlier replays, the pending dead letters, then upkeep."""
        if self._file is not None:
            self._rules = self._file.current()
            if self._file.alerts is not None:  # the file's [[alert]] tables replace the rules
                self.alert_rules = tuple(self._file.alerts)
        now = self._clock()
        for replay, ok in await self._tracker.settle(self.queue.client, self.queue.keys):
            self._breaker(replay.rule).record(ok, now)
        read, self._flagged = 0, []
        while read < MAX_PER_PASS and not self._stopping.is_set():
            found, after = await claims.page(
                self.queue.client, self.queue.keys, self._cursor, self.batch_size
            )
            read += len(found)
            await self._handle(found, now)
            self._cursor = -math.inf if after is None else after
            if after is None:
                break
        if self._flagged:
            await self._raise(self._review_alert(self._flagged))
        await self._upkeep()
        self.stats.passes += 1

    async def _handle(self, found: list[Candidate], now: int) -> None:
        """Claim, decide again on fresh fields, act, release."""
        wanted = [c.id for c in found if self._decide(c, now)[1] != "wait"]
        claimed = await claims.claim(
            self.queue.client, self.queue.keys, self.id, wanted, self.claim_ms
        )
        try:
            gates: dict[str, bool] = {}
            for candidate in claimed:
                rule, decision = self._decide(candidate, now)
                if decision == "replay" and rule.strategy == "conditional":
                    if rule.label not in gates:
                        gates[rule.label] = await gate_open(rule)
                    if not gates[rule.label] or not self._breaker(rule.label).allows(now):
                        continue
                await self._act(candidate, rule, decision)
        finally:
            await claims.release(
                self.queue.client, self.queue.keys, self.id, [c.id for c in claimed]
            )

    def _decide(self, candidate: Candidate, now: int) -> tuple[RedriveRule, Decision]:
        rule = first_match(self._rules, candidate)
        return rule, rule.decide(candidate, now)

    def _breaker(self, label: str) -> CircuitBreaker:
        if label not in self._breakers:
            rule = next((r for r in self._rules if r.label == label), None)
            threshold, cooldown = (5, 60_000) if rule is None else (
                rule.breaker_threshold, rule.breaker_cooldown)  # fmt: skip
            self._breakers[label] = CircuitBreaker(threshold, cooldown)
        return self._breakers[label]

    async def _act(self, dl: Candidate, rule: RedriveRule, decision: Decision) -> None:
        try:
            if decision == "replay":
                await self._replay(dl, rule)
            elif decision == "manual":
                await self._flag_manual(dl, rule)
            elif decision == "failed":
                note = f"rule {rule.label}: replayed {dl.replay_count} times (max_replays "
                note += f"{rule.max_replays})"
                if await self.queue.set_dead_letter_status(
                    dl.id, "failed", actor="redriver", note=note, expect=["pending"]
                ):
                    self.stats.failed += 1
        except (JobNotFoundError, JobStateError, NotADeadLetterError):
            self.stats.lost += 1  # gone, or taken by an operator or a DLQ worker meanwhile

    async def _replay(self, dl: Candidate, rule: RedriveRule) -> None:
        new_id = await self.queue.replay_dead_letter(
            dl.id, actor="redriver", note=f"rule {rule.label}", rule=rule.label
        )
        self.stats.replayed += 1
        self._tracker.add(Replay(dl.id, new_id, dl.source_queue, rule.label, dl.replay_count))
        log.info("replayed dead letter %s of %r by rule %s as job %s", dl.id,
                 self.queue.name, rule.label, new_id)  # fmt: skip

    async def _flag_manual(self, dl: Candidate, rule: RedriveRule) -> None:
        note = f"rule {rule.label}: needs a human"
        if not await self.queue.set_dead_letter_status(
            dl.id, "manual", actor="redriver", note=note, expect=["pending"]
        ):
            return
        self.stats.flagged += 1
        self._flagged.append(dl)

    def _review_alert(self, flagged: list[Candidate]) -> Alert:
        """One alert per pass for the dead letters it flagged ``manual`` (not one each: a
        burst of failures must not become a burst of pages)."""
        shown = ", ".join(f"{dl.id} ({dl.name}, {dl.error_type})" for dl in flagged[:5])
        more = f" and {len(flagged) - 5} more" if len(flagged) > 5 else ""
        message = f"{len(flagged)} dead letters flagged manual for review: {shown}{more}"
        only = flagged[0].id if len(flagged) == 1 else None
        return Alert("DeadLetterNeedsReview", self.queue.name, "warning", "firing",
                     len(flagged), message, self._clock(), only)  # fmt: skip

    async def _upkeep(self) -> None:
        """Periodic duties, each when due and when this redriver leads it: settling replays
        that will never report back, pruning, alerts."""
        moment = time.monotonic()
        keys, client = self.queue.keys, self.queue.client
        intervals = {"settle": self.settle_interval, "prune": self.prune_interval,
                     "alerts": self.alert_interval}  # fmt: skip
        for role, interval in intervals.items():
            if moment < self._due[role]:
                continue
            self._due[role] = moment + interval
            lease = max(int(interval * 3000), 10_000)
            if await leadership.acquire(client, keys, role, self.id, lease):
                await self._duty(role)

    async def _duty(self, role: str) -> None:
        if role == "settle":
            self.stats.settled += await self.queue.settle_dead_letters()
        elif role == "prune":
            self.stats.pruned += await self.queue.prune_dead_letters()
        else:
            health = await self.queue.get_dead_letter_health()
            for alert in self._alerts.evaluate(self.alert_rules, health, self.queue.name):
                await self._raise(alert)

    async def _raise(self, alert: Alert) -> None:
        """Log an alert, record it on the events stream and hand it to ``on_alert``."""
        level = logging.WARNING if alert.state == "firing" else logging.INFO
        log.log(level, "alert %s %s (%s): %s", alert.name, alert.state, alert.severity,
                alert.message)  # fmt: skip
        fields = {"event": "alert", "name": alert.name, "state": alert.state,
                  "severity": alert.severity, "message": alert.message,
                  "value": "" if alert.value is None else str(alert.value),
                  "deadLetterId": alert.dead_letter_id or ""}  # fmt: skip
        await self.queue.client.xadd(
            self.queue.keys.events, fields,  # type: ignore[arg-type]
            maxlen=self.queue.max_events, approximate=True,
        )  # fmt: skip
        if self.on_alert is not None:
            try:
                result = self.on_alert(alert)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("on_alert failed for alert %s", alert.name)
