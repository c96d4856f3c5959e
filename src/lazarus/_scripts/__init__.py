"""Loads the Lua scripts, expands their includes and calls them: as functions by FCALL, or by
EVALSHA where the server has no functions (Redis 6.2).

Each ``<name>.lua`` here is one transition and opens with a header naming its ``KEYS[i]`` and
``ARGV[i]``; ``includes/`` holds shared local functions pulled in by ``-- @include <name>``
lines, of which a script keeps those it calls (:mod:`._source`). Scripts are read once per
process; a call the server refuses because it lacks the function or script (after a restart,
a flush) is loaded and sent again (:mod:`._loading`).

Scripts are the hot path (one call per job added, claimed or finished), so a call goes straight
to a pooled connection: it skips the per-command bookkeeping of ``Redis.execute_command``.

A connection can drop after Redis ran a script but before its reply arrived. Such a call is
sent again, on a fresh connection and as the client's retry policy says, only when running it
twice is harmless (:data:`REPEATABLE`); a timeout is never followed by a second send, since
the script may still be running. Per script:

- ``complete_job``, ``retry_job``, ``fail_job``, ``dead_letter_job``, ``postpone_job``: their
  call id is the id and lock token of the job they finish (a token names one claim, in any
  life of the job's id: ``includes/lock_token.lua``).
  Each remembers
  its reply in its worker slot's ``reply`` key (``includes/once.lua``); a second run finds
  the lock released and answers with the first run's reply and next job instead of reporting
  a lost lock. The dead letter's id is chosen once per attempt, so every run names the same.
- ``dead_letter_out`` (the first step of a move to another cluster slot) keeps its reply
  memo as ``dead_letter_job`` does; ``dead_letter_in`` (the second) remembers each move it
  added and adds none twice. ``replay_out`` is sent once, as ``replay_dead_letters``;
  ``replay_in`` adds each new job once, as ``dead_letter_in``; ``settle_moved`` checks
  each dead letter still waits for the same job, as ``settle_dead_letters``.
- ``claim_jobs``: the worker gives each claim a fresh call id and keeps it until a reply
  arrives, so a claim sent again returns the jobs the first run claimed. An OJS fetch, sent
  again only by this retry, keeps its memo for minutes at most (``ojs.backend.FETCH_MEMO_MS``).
- ``sweep_stalled``: a dead letter's id is derived from the job in Lua and never overwrites
  one that exists; a second run only sweeps leases that expired since.
- ``add_jobs``: the client chooses every id, so a second run answers JOB_EXISTS and the
  caller reads the job. A second send says it is one (:meth:`Script.command` sets ARGV
  ``resent``), and then also answers JOB_EXISTS for a job its first run added that ran and
  was deleted since: such a job leaves a tombstone for 30 s (``includes/job_logs.lua``).
- ``extend_locks``, ``pause_queue`` (its reply is not used) and
  ``scan_dead_letters`` (a read) and ``settle_dead_letters`` (it checks each dead letter
  still waits for the same job) are safe to run twice as they are.
- ``acquire_lease`` (renews what the first run took), ``claim_dead_letters`` (renews the
  claims the first run made, answering the same) and ``release_dead_letter_claims`` are safe
  to run twice; ``prune_dead_letters`` is sent once (a second run would prune the next batch
  and report only those).
- ``add_repeatable`` (a second run finds the schedule and answers with its pending
  occurrence) and ``repeat_job`` (a compare-and-set on the schedule's next due time; a
  second run of a call that skipped its occurrence finds it gone and answers NOT_HELD, so
  it still does not run) change nothing when run twice; ``remove_repeatable`` (a second run
  answers 0) is sent once.
- ``update_progress`` sets the same value again (one more ``progress`` event);
  ``beat_worker`` renews the same registration again.
- ``add_log`` (a second run would append the line twice) and ``claim_record`` (a second
  run would find the record its first wrote, and answer that the id is taken) are sent once.
- ``remove_job`` (a second run would report JOB_NOT_FOUND for the job it removed),
  ``promote_job`` (a second run would report JOB_STATE for the job it promoted),
  ``promote_jobs`` (a second run would promote the next batch and report only those),
  ``clean_jobs`` (a second run would clean up to ``limit`` more and report only those),
  ``change_job`` (a second run of a priority change would place the job again, behind the
  jobs of its priority added meanwhile),
  ``replay_dead_letters`` and ``purge_dead_letters`` (a second run would report the dead
  letters the first one handled as missing) and ``set_dead_letter_status`` (a second run
  would record the change twice in the timeline) are sent once: a dropped connection raises, and
  the caller learns that the outcome is unknown rather than a wrong answer.
- ``detach_dead_letters`` (a second run would detach what arrived since) and
  ``drop_detached_dead_letters`` (a second run would delete the next batch and report only
  those) are sent once: what a lost reply leaves detached is dropped by the next purge or
  pruning (:mod:`lazarus.dead_letter.detach`).
- ``update_operation`` sets the same fields again, and is safe to run twice;
  ``claim_operation`` is sent once (a second run would find the lease its first run took, and
  answer that another server holds it: the operation is then resumed once that lease runs out).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._connection import Client
from . import cluster
from ._coalesce import IN_FLIGHT as IN_FLIGHT
from ._coalesce import Coalescer, Packed, coalescer, resent
from ._loading import function_of, provide
from ._loading import functions_on as functions_on
from ._loading import unrun as unrun
from ._source import read, script_source
from ._wire import hiredis_wire as _hiredis_wire
from ._wire import pack as pack
from ._wire import send_and_read as _send_and_read

# Kept on the pool object itself, so that it goes with the pool (a weak dictionary keyed by
# the pool would keep it alive: a redis-py connection refers back to its pool).
_SPARE = "_lazarus_spare"

_HEADER_KEY = re.compile(r"^\s*KEYS\[(\d+)\]\s+(\w+)", re.MULTILINE)
_HEADER_ARG = re.compile(r"^\s*ARGV\[(\d+)\]\s+(\w+)", re.MULTILINE)


class Script:
    """One Lua transition: its expanded source and SHA1, its function and library, its
    header."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.repeatable = name in REPEATABLE
        self.raw = read(f"{name}.lua")
        self.function, self.library = function_of(name, self.raw)
        header = self.raw.split("]]", 1)[0]
        self.header_keys = dict(_parse(_HEADER_KEY, header))
        self.header_args = dict(_parse(_HEADER_ARG, header))
        # A script told whether a call is sent again (add_jobs) takes it as ARGV 'resent'.
        self._resent = next((i for i, arg in self.header_args.items() if arg == "resent"), 0)

    @functools.cached_property
    def source(self) -> str:
        """The script's text as EVAL runs it (made when first needed: Redis 7.0 and later
        call the function)."""
        return script_source(self.name)[1]

    @functools.cached_property
    def sha(self) -> str:
        """The SHA1 of :attr:`source`, which EVALSHA names."""
        return hashlib.sha1(self.source.encode()).hexdigest()

    def command(self, keys: Sequence[str], args: Sequence[Any], functions: bool = True) -> Packed:
        """The command that runs this script (FCALL, or EVALSHA without ``functions``: see
        :func:`functions_on`), for :func:`execute`; packed already when hiredis takes its
        arguments."""
        command = Packed(
            ("FCALL", self.function, len(keys), *keys, *args)
            if functions
            else ("EVALSHA", self.sha, len(keys), *keys, *args)
        )
        wire = _hiredis_wire(command)
        if wire is not None:  # else redis-py packs it when it is sent
            command.wire = wire
        if self._resent:
            command.again = functools.partial(self._sent_again, keys, args, functions)
        return command

    def _sent_again(self, keys: Sequence[str], args: Sequence[Any], functions: bool) -> Packed:
        """The call of ``keys`` and ``args`` as sent again: with ARGV ``resent`` = 1."""
        again = list(args)
        again[self._resent - 1] = 1
        return self.command(keys, again, functions)

    async def __call__(self, client: Client, keys: Sequence[str], args: Sequence[Any]) -> Any:
        batches = coalesced(client)
        reply = await batches.call(self.command(keys, args, functions_on(client)), self.repeatable)
        # Refused unrun (no such function or script, or no functions at all): sending it again
        # is safe. A server without functions may lack the script as well: three rounds at most.
        for _ in range(3):
            why = unrun(reply)
            if why is None:
                break
            functions = await provide(client, batches, why, self)
            reply = await batches.call(self.command(keys, args, functions), self.repeatable)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def call_many(
        self,
        client: Client,
        calls: Sequence[tuple[Sequence[str], Sequence[Any]]],
        commands: Sequence[Packed] | None = None,
    ) -> list[Any]:
        """Run several calls in one round trip, in order, on one connection; ``commands``:
        their :meth:`command`, when the caller readied them already.

        Only for idempotent calls: a call the server refused unrun (:func:`unrun`) is run
        again after loading the function or script.
        """
        if commands is None:
            functions = functions_on(client)
            commands = [self.command(keys, args, functions) for keys, args in calls]
        results = await execute(client, commands, repeatable=self.repeatable)
        for index, result in enumerate(results):
            if unrun(result) is not None:
                keys, args = calls[index]
                results[index] = await self(client, keys, args)
            elif isinstance(result, Exception):
                raise result
        return results


async def execute(
    client: Client,
    commands: Sequence[Sequence[Any]],
    *,
    timeout: float | None = None,
    repeatable: bool = False,
) -> list[Any]:
    """Send ``commands`` in one write on a pooled connection and return their replies in order,
    unparsed (as ``execute_command`` returns an EVALSHA reply); an error reply is returned as
    its exception.

    A dropped connection is retried on a fresh one, as the client's retry policy says, only
    when ``repeatable`` (every command is harmless to run twice: it may have run before the
    connection dropped); otherwise it raises. A timeout always raises, the connection closed.

    ``timeout`` (seconds) bounds the wait for the replies, for commands that block; by default
    the connection's ``socket_timeout`` applies.
    """
    # A plain Redis first: isinstance against RedisCluster (a typing Protocol among its bases)
    # costs about a microsecond, every call.
    if type(client) is not Redis and isinstance(client, RedisCluster):
        return await cluster.execute(
            client, commands, _send_and_read, timeout=timeout, repeatable=repeatable
        )
    pool = client.connection_pool
    kept = vars(pool)
    conn = kept.pop(_SPARE, None) or await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        try:
            replies = await _send_and_read(conn, commands, timeout)
        except RedisConnectionError as error:
            if not repeatable:
                raise
            replies = await _sent_again(conn, commands, timeout, error)
    except BaseException:
        await pool.release(conn)  # closed already by a failed read or write
        raise
    # Keep one connection per pool aside for the next call (most calls come one at a time):
    # it stays checked out, so the pool's per-checkout bookkeeping is skipped. The pool still
    # owns it and closes it with the others.
    if _SPARE in kept:
        await pool.release(conn)
    else:
        kept[_SPARE] = conn
    return replies


async def _sent_again(
    conn: AbstractConnection,
    commands: Sequence[Sequence[Any]],
    timeout: float | None,
    dropped: RedisConnectionError,
) -> list[Any]:
    """The replies of ``commands`` whose first send ``dropped`` lost: sent again (each as
    :func:`resent`) as the connection's retry policy says, that drop its first failure. A
    timeout is not retried: the commands may still be running."""
    failures = [dropped]

    async def attempt() -> list[Any]:
        if failures:
            raise failures.pop()
        try:
            return await _send_and_read(conn, [resent(command) for command in commands], timeout)
        except RedisTimeoutError as error:
            raise _Final(error) from None

    try:
        replies: list[Any] = await conn.retry.call_with_retry(
            attempt, lambda _error: conn.disconnect()
        )
    except _Final as final:
        raise final.error from None
    return replies


def coalesced(client: Client) -> Coalescer:
    """The batches that the calls of ``client``'s pool share (see ``_coalesce``)."""
    return coalescer(client, execute)


async def send(client: Client, *command: Any, repeatable: bool = True) -> Any:
    """Send one plain command with the batches of ``client``'s pool; raise an error reply."""
    reply = await coalesced(client).call(command, repeatable)
    if isinstance(reply, Exception):
        raise reply
    return reply


async def send_all(client: Client, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """Send plain commands that are harmless to run twice (reads) in one write; their replies
    in order; raise the first error reply."""
    replies = await execute(client, commands, repeatable=True)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


class _Final(Exception):
    """Carries an error past the retry policy, which would otherwise send the commands again."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _parse(pattern: re.Pattern[str], header: str) -> list[tuple[int, str]]:
    return [(int(index), name) for index, name in pattern.findall(header)]


@functools.cache
def load(name: str) -> Script:
    """The script called ``name`` (file ``<name>.lua``), read once per process."""
    return Script(name)


CALL_BUDGET_US = 4_000
"""How long one budgeted script call may hold Redis (µs, ``includes/budget.lua``): the calls
over many entries (bulk replay and purge, clean, retry_jobs, the stall sweep) stop there and
the caller sends the rest in the next call."""

REPEATABLE = frozenset({
    "add_jobs", "claim_jobs", "complete_job", "retry_job", "fail_job", "dead_letter_job",
    "sweep_stalled", "extend_locks", "pause_queue", "scan_dead_letters", "update_progress",
    "postpone_job", "add_repeatable", "repeat_job", "settle_dead_letters", "acquire_lease",
    "claim_dead_letters", "release_dead_letter_claims", "dead_letter_out", "dead_letter_in",
    "replay_in", "settle_moved", "job_state", "beat_worker", "update_operation",
})  # fmt: skip
"""The scripts that a call may send twice (see the module's docstring)."""

NAMES = (
    "add_jobs",
    "claim_jobs",
    "complete_job",
    "retry_job",
    "fail_job",
    "dead_letter_job",
    "sweep_stalled",
    "extend_locks",
    "pause_queue",
    "remove_job",
    "clean_jobs",
    "prune_dead_letters",
    "acquire_lease",
    "claim_dead_letters",
    "release_dead_letter_claims",
    "query_dead_letters",
    "replay_dead_letters",
    "purge_dead_letters",
    "detach_dead_letters",
    "drop_detached_dead_letters",
    "migrate_dead_letters",
    "release_job",
    "retry_failed_jobs",
    "update_progress",
    "add_log",
    "postpone_job",
    "add_repeatable",
    "repeat_job",
    "remove_repeatable",
    "set_dead_letter_status",
    "settle_dead_letters",
    "dead_letter_out",
    "dead_letter_in",
    "replay_out",
    "replay_in",
    "settle_moved",
    "clear_move",
    "forget_outbox",
    "job_state",
    "beat_worker",
    "promote_job",
    "promote_jobs",
    "change_job",
    "cancel_job",
    "claim_record",
    "claim_operation",
    "update_operation",
)
