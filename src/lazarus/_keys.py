"""The only place Redis key names are built. ``docs/redis-keys.md`` documents each key.

Every key of one queue shares the hash tag ``{<queue>}`` so that a queue lives in one Redis
Cluster slot (a name that opens with a tag of its own, ``{payments}-dlq``, is used as it is:
``<prefix>:{payments}-dlq:wait``, in the slot of ``payments``)::

    <prefix>:{<queue>}:wait         LIST   waiting job ids; LPUSH in, RPOP out (FIFO)
    <prefix>:{<queue>}:prioritized  ZSET   prioritized job ids, score priority * 2^32 + counter
    <prefix>:{<queue>}:pc           STRING counter that keeps FIFO order within one priority
    <prefix>:{<queue>}:delayed      ZSET   delayed job ids, score = due time (ms)
    <prefix>:{<queue>}:active       LIST   job ids being processed
    <prefix>:{<queue>}:leases       ZSET   active job ids, score = lock expiry (ms)
    <prefix>:{<queue>}:completed    ZSET   completed job ids, score = finish time (ms)
    <prefix>:{<queue>}:failed       ZSET   failed job ids, score = finish time (ms)
    <prefix>:{<queue>}:marker       ZSET   wake-up marker that idle workers block on
    <prefix>:{<queue>}:meta         HASH   queue flags (paused) and settings
    <prefix>:{<queue>}:events       STREAM events, trimmed to about ``max_events`` entries
    <prefix>:{<queue>}:job:<id>     HASH   one job
    <prefix>:{<queue>}:dl:i:<f>:<v> ZSET   the dead letter store: the dead letters whose
                                           field f has value v, in arrival order (the status
                                           indexes i:s:* partition the store)
    <prefix>:{<queue>}:dl:v:<f>     ZSET   the distinct values of field f
    <prefix>:{<queue>}:dl:c         HASH   a count per combination of the five field values
    <prefix>:{<queue>}:dl:o         HASH   original job id -> dead letter id
    <prefix>:{<queue>}:dl:x         STREAM the outbox: every change of a dead letter, for the
                                           record exporter and webhooks (docs/record.md)
    <prefix>:{<queue>}:dl:x:on      STRING present while the outbox is enabled
    <prefix>:{<queue>}:dl:wh:s:<e>  HASH   webhook endpoint e's retries: entry -> schedule
    <prefix>:{<queue>}:dl:wh:log    STREAM the webhook delivery log, one entry per attempt
    <prefix>:{<queue>}:repeat       ZSET   the keys of the queue's schedules, score = next due (ms)
    <prefix>:{<queue>}:repeat:<key> HASH   one schedule: its job template, times and count
    <prefix>:{<queue>}:limiter      STRING jobs started in the rate limit's window (PX = its end)
    <prefix>:{<queue>}:metrics      HASH   jobs completed / failed for good, per minute and in
                                           all (includes/metrics.lua)
    <prefix>:{<queue>}:cancels      STRING running jobs cancel_job asked to stop, a count the
                                           workers running jobs read every 0.5 s
    <prefix>:{<queue>}:logs:<id>    LIST   one job's log lines, oldest first
    <prefix>:{<queue>}:de:<id>      STRING the job holding a deduplication id (PX = its ttl)
    <prefix>:{<queue>}:dl:retention STRING the retention policy (JSON)
    <prefix>:{<queue>}:dl:claims    ZSET   dead letters a redriver holds, score = claim expiry
                                           (ms); dl:claimers HASH: dead letter id -> holder
    <prefix>:{<queue>}:dl:leader:<role>     STRING the holder of a periodic duty (settle,
                                           prune, alerts), expiring
    <prefix>:{<queue>}:wake:<worker>            ZSET   wakes one worker's blocking claim
    <prefix>:{<queue>}:reply:<worker>:<slot>    STRING the last reply of one worker slot
    <prefix>:{<queue>}:moves                    HASH   moves to another cluster slot not yet
                                           known to have arrived: dead letter id -> JSON
    <prefix>:{<queue>}:moves:in                 ZSET   moves taken in, score = when (ms)
    <prefix>:queues                 SET    names of every queue with this prefix
    <prefix>:dlqs                   SET    names of every queue used as a dead letter queue

Scripts that pick a job they cannot know in advance (claim, stall sweep, retention) receive
``<prefix>:{<queue>}:job:`` as a key and append the id: the only key suffix built in Lua, and
always inside the queue's own hash tag. The store prefix ``<prefix>:{<queue>}:dl:`` is derived
from ``job_prefix`` in Lua the same way (``includes/queue_keys.lua``) where a script receives
the queue's key group.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from ._ids import new_dead_letter_id as new_dead_letter_id
from ._ids import new_id as new_id

# Braces would break the hash tag; whitespace and control characters (C0, DEL and C1) make
# keys unreadable; a lone surrogate has no UTF-8 form, so it could never reach Redis.
_FORBIDDEN = re.compile(r"[{}\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")
MAX_NAME_LENGTH = 200
_RULE = "braces, whitespace, control characters or lone surrogates"


def validate_name(value: object, field: str) -> str:
    """Return ``value`` if it is a usable queue name or prefix, else raise naming ``field``.

    A name is a ``str`` of 1 to :data:`MAX_NAME_LENGTH` characters without braces, whitespace
    (Unicode's, not only ASCII's), control characters (U+0000-U+001F, U+007F-U+009F) or lone
    surrogates (U+D800-U+DFFF).
    """
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{field} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{field} is longer than {MAX_NAME_LENGTH} characters")
    bad = _FORBIDDEN.search(value)
    if bad:
        raise ValueError(
            f"{field} {value!r} has {bad.group()!r} at index {bad.start()}; "
            f"it must not contain {_RULE}"
        )
    return value


_TAG = re.compile(r"\{([^{}]+)\}")


def validate_queue_name(value: object, field: str) -> str:
    """Return ``value`` if it is a usable queue name, else raise naming ``field``.

    A queue name follows :func:`validate_name`, except that it may open with an explicit
    hash tag: ``{payments}-dlq`` lives in the Redis Cluster slot of ``{payments}``, which is
    the slot of the queue ``payments`` (docs/redis-cluster.md). Braces anywhere else, empty
    or nested, are refused.
    """
    if not isinstance(value, str) or not value.startswith("{"):
        return validate_name(value, field)
    tag = _TAG.match(value)
    if tag is None or any(c in value[tag.end() :] for c in "{}:"):
        raise ValueError(
            f"{field} {value!r} misuses braces: they may only open the name as a hash tag "
            "such as '{payments}-dlq' (a non-empty tag; no other braces, and no ':' after it)"
        )
    validate_name(tag.group(1) + value[tag.end() :], field)
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{field} is longer than {MAX_NAME_LENGTH} characters")
    return value


def hash_tag(queue: str) -> str:
    """The hash tag of ``queue``'s keys: its explicit tag if it opens with one, else the whole
    name (so ``payments``, ``{payments}`` and ``{payments}-dlq`` share one slot)."""
    tag = _TAG.match(queue)
    return tag.group(1) if tag else queue


def validate_job_id(value: object, field: str = "job_id") -> str:
    """Return ``value`` if it is a usable job id (the rules of :func:`validate_name`), else
    raise naming ``field``."""
    return validate_name(value, field)


def has_lone_surrogate(value: str) -> bool:
    """Whether ``value`` holds a lone surrogate, which UTF-8 (and so Redis) cannot carry."""
    return not value.isascii() and _SURROGATE.search(value) is not None


_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Every character Redis's glob matcher treats specially, outside and inside [...] classes.
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]^-])")


def glob_escape(text: str) -> str:
    """``text`` as a Redis MATCH pattern that matches exactly ``text``."""
    return _GLOB_SPECIAL.sub(r"\\\1", text)


@dataclasses.dataclass(frozen=True)
class QueueKeys:
    """The key names of one queue."""

    prefix: str
    queue: str

    def __post_init__(self) -> None:
        validate_name(self.prefix, "prefix")
        validate_queue_name(self.queue, "queue name")

    @functools.cached_property
    def base(self) -> str:
        """``<prefix>:{<queue>}:``, or for a name with an explicit hash tag the name as it
        is: ``<prefix>:{payments}-dlq:`` (``{payments}`` alone names the keys of ``payments``)."""
        if self.queue.startswith("{"):
            rest = self.queue[len(hash_tag(self.queue)) + 2 :]
            return f"{self.prefix}:{{{hash_tag(self.queue)}}}{rest}:"
        return f"{self.prefix}:{{{self.queue}}}:"

    @property
    def wait(self) -> str:
        return self.base + "wait"

    @property
    def prioritized(self) -> str:
        return self.base + "prioritized"

    @property
    def pc(self) -> str:
        return self.base + "pc"

    @property
    def delayed(self) -> str:
        return self.base + "delayed"

    @property
    def active(self) -> str:
        return self.base + "active"

    @property
    def leases(self) -> str:
        return self.base + "leases"

    @property
    def completed(self) -> str:
        return self.base + "completed"

    @property
    def failed(self) -> str:
        return self.base + "failed"

    @property
    def marker(self) -> str:
        return self.base + "marker"

    @property
    def meta(self) -> str:
        return self.base + "meta"

    @property
    def events(self) -> str:
        return self.base + "events"

    @property
    def workers(self) -> str:
        """The live workers: a sorted set of worker names, scored by when each one's
        registration expires (ms), beside a hash of their details (:mod:`lazarus.workers`)."""
        return self.base + "workers"

    @property
    def workers_info(self) -> str:
        return self.base + "workers:info"

    @functools.cached_property
    def group(self) -> tuple[str, ...]:
        """The ten keys a transition script receives for a queue, in ``queue_keys`` order."""
        return (
            self.wait, self.prioritized, self.pc, self.delayed, self.active, self.leases,
            self.marker, self.meta, self.events, self.job_prefix,
        )  # fmt: skip

    @functools.cached_property
    def dead_letter_group(self) -> tuple[str, ...]:
        """The four keys of a dead letter queue that a dead-lettering script writes."""
        return (self.dl, self.marker, self.events, self.meta)

    @property
    def dl(self) -> str:
        """The prefix of the dead letter store's keys (scripts append the rest)."""
        return self.base + "dl:"

    def dl_tally(self, name: str) -> str:
        """The tally ``name`` of the dead letter store (``includes/tally.lua``)."""
        return self.dl + "tally:" + name

    def dl_index(self, code: str, value: str) -> str:
        """The index of the dead letters whose field ``code`` has ``value``."""
        return f"{self.base}dl:i:{code}:{value}"

    def dl_values(self, code: str) -> str:
        return f"{self.base}dl:v:{code}"

    @property
    def dl_counts(self) -> str:
        return self.base + "dl:c"

    @property
    def dl_origins(self) -> str:
        return self.base + "dl:o"

    @property
    def dl_detached(self) -> str:
        """The detached keys of whole-store purges not yet finished (``dl:p:<token>:<status>``)."""
        return self.base + "dl:p"

    @property
    def dl_outbox(self) -> str:
        """The outbox stream: one entry per change of a dead letter, while enabled."""
        return self.base + "dl:x"

    @property
    def dl_outbox_enabled(self) -> str:
        """Present while something drains the outbox; scripts append only then."""
        return self.base + "dl:x:on"

    def dl_outbox_copied(self, group: str) -> str:
        """Present once consumer group ``group`` has copied the dead letters that predate its
        outbox entries (the record's one-time copy)."""
        return self.base + "dl:x:copied:" + group

    def dl_webhook_schedule(self, endpoint: str) -> str:
        """Webhook endpoint ``endpoint``'s retries: outbox entry id -> attempts and next try."""
        return self.base + "dl:wh:s:" + endpoint

    @property
    def dl_webhook_log(self) -> str:
        """The webhook delivery log: one entry per attempt, trimmed to about 10,000."""
        return self.base + "dl:wh:log"

    @property
    def dl_retention(self) -> str:
        """The dead letter queue's retention policy (JSON)."""
        return self.base + "dl:retention"

    @property
    def dl_claims(self) -> str:
        """Dead letters claimed by a redriver, score = when the claim expires (ms)."""
        return self.base + "dl:claims"

    @property
    def dl_claimers(self) -> str:
        """Who holds each claim of :attr:`dl_claims`."""
        return self.base + "dl:claimers"

    def dl_leader(self, role: str) -> str:
        """The expiring lease of the one process doing a periodic duty (``settle``,
        ``prune``, ``alerts``)."""
        return self.base + "dl:leader:" + role

    @property
    def job_prefix(self) -> str:
        return self.base + "job:"

    def job(self, job_id: str) -> str:
        return self.base + "job:" + job_id

    @property
    def repeat_index(self) -> str:
        """The index of the queue's schedules (repeatable jobs)."""
        return self.base + "repeat"

    def repeat(self, key: str) -> str:
        """One schedule's hash."""
        return self.base + "repeat:" + key

    @property
    def limiter(self) -> str:
        """The count of the rate limit's current window (built in Lua too, from ``meta``)."""
        return self.base + "limiter"

    @property
    def cancels(self) -> str:
        """How many running jobs ``cancel_job`` asked to stop, so that their workers look at
        once (built in Lua too, from ``meta``)."""
        return self.base + "cancels"

    @property
    def metrics(self) -> str:
        """Jobs completed and failed for good, per minute and in all (built in Lua too, from
        ``meta``: ``includes/metrics.lua``)."""
        return self.base + "metrics"

    def logs(self, job_id: str) -> str:
        """A job's log lines (built in Lua too, from the job's key: ``includes/job_logs.lua``)."""
        return self.base + "logs:" + job_id

    def gone(self, job_id: str) -> str:
        """The tombstone of a job deleted soon after its add (built in Lua too, from the job's
        key: ``includes/job_logs.lua``)."""
        return self.base + "gone:" + job_id

    def dedup(self, deduplication_id: str) -> str:
        """The key naming the job that holds a deduplication id (built in Lua too, from
        ``job_prefix``: ``includes/dedup.lua``)."""
        return self.base + "de:" + deduplication_id

    def wake(self, worker_name: str) -> str:
        """The sorted set a worker's blocking claim also waits on, so close() can wake it."""
        return self.base + "wake:" + worker_name

    def reply(self, worker_name: str, slot: str) -> str:
        """The memo of the last state-changing call of one worker slot (a job slot's number,
        or ``claim`` for the worker's own claims): a call re-sent after a dropped connection
        finds its reply there instead of running twice."""
        return self.base + "reply:" + worker_name + ":" + slot

    @property
    def moves(self) -> str:
        """The moves of this queue's jobs to a queue in another Redis Cluster slot that are
        not known to have arrived: dead letter id -> the move (JSON). A cross-slot move's
        first step writes it, the last one deletes it (docs/redis-cluster.md)."""
        return self.base + "moves"

    @property
    def moves_in(self) -> str:
        """The moves this queue took in from another slot, score = when (ms), kept a week:
        the second step of a move seen before changes nothing."""
        return self.base + "moves:in"

    @property
    def registry(self) -> str:
        return f"{self.prefix}:queues"

    @property
    def dead_letter_registry(self) -> str:
        """The set of the names of every queue used as a dead letter queue."""
        return f"{self.prefix}:dlqs"


def audit_key(prefix: str) -> str:
    """The stream of the audit trail of the operator surfaces (``lazarus.http.audit``)."""
    return f"{validate_name(prefix, 'prefix')}:audit"


def session_key(prefix: str, digest: str) -> str:
    """One dashboard session, by the SHA-256 of its id (the id itself is never stored)."""
    return f"{validate_name(prefix, 'prefix')}:session:{digest}"
