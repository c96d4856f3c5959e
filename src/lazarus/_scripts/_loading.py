"""How a script reaches a server: as a function (Redis 7.0 and later), or by EVALSHA.

Run by EVALSHA, a script's whole text runs on every call, and every shared function of its
includes is made anew each time: for a worker's outcome, some forty closures, about a tenth of
what Redis spends on the call. Loaded as a function library (``FUNCTION LOAD``), they are made
once, and a call (``FCALL``) runs only the script's body (:func:`._source.library`).

A call goes as ``FCALL`` until the server says it has no such command (Redis 6.2), or that the
client's user may not call or load functions (its ACL): from then on that client (its
connection pool, or the cluster client) calls by EVALSHA. A call refused
because the server lacks the function or script (after a restart without persistence, a
``FUNCTION FLUSH`` or ``SCRIPT FLUSH``, a new cluster node) did not run: the library or script
is loaded and the call sent again. Loads of one library by one client's concurrent calls (a
worker's slots after a restart) share one ``FUNCTION LOAD``.

Each library is named by the script and a digest of its text, so that versions of lazarus
sharing a server never call one another's: an upgrade leaves the old libraries behind
(``lazarus scripts prune`` removes every library but this version's; a version still running
loads its own again at its next call).

Flags (:data:`ALLOW_OOM`, :data:`READS_ONLY`): when Redis is out of memory (``maxmemory``
reached, ``noeviction``), a function without ``allow-oom`` is refused whole, before it runs.
The scripts that move, finish, renew or remove what exists run anyway (as they did by EVALSHA,
where only a script's first write could be refused, and their first write is a removal): a
worker must be able to finish its jobs and keep its leases when memory is full. Those that
make new data (adds, replays, logs, progress, schedules, worker heartbeats) are refused.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoPermissionError, NoScriptError, OutOfMemoryError, ResponseError

from .._connection import Client
from ._source import library

if TYPE_CHECKING:
    from . import Script
    from ._coalesce import Coalescer

# Kept on the connection pool (or cluster client) itself, so that they go with it.
_EVAL_ONLY = "_lazarus_eval_only"  # its server has no functions: call by EVALSHA
_LOADING = "_lazarus_loading"  # function name -> the load on its way
_PLACEHOLDER = "lazarus_function_name"  # in a library's text until its digest names it
_LIBRARY_PREFIX = "lazarus_"  # a library's name (and its one function's): this, script, digest

# The reasons a call was refused before it ran (:func:`unrun`).
NO_FUNCTIONS = "no functions"
NO_FUNCTION = "no function"
NO_SCRIPT = "no script"

ALLOW_OOM = frozenset({
    "claim_jobs", "complete_job", "retry_job", "fail_job", "dead_letter_job", "postpone_job",
    "release_job", "sweep_stalled", "extend_locks", "acquire_lease", "pause_queue",
    "remove_job", "clean_jobs", "cancel_job", "change_job", "promote_job", "promote_jobs",
    "retry_failed_jobs", "remove_repeatable", "claim_dead_letters",
    "release_dead_letter_claims", "set_dead_letter_status", "settle_dead_letters",
    "settle_moved", "prune_dead_letters", "purge_dead_letters", "detach_dead_letters",
    "drop_detached_dead_letters", "dead_letter_out", "dead_letter_in", "replay_in",
    "clear_move", "forget_outbox",
})  # fmt: skip
"""The scripts that run when memory is full (flag ``allow-oom``): they move, finish, renew or
remove what exists. The others (``add_jobs``, ``add_repeatable``, ``repeat_job``,
``add_log``, ``update_progress``, ``replay_dead_letters``, ``replay_out``,
``migrate_dead_letters``, ``beat_worker``) are refused whole then."""

READS_ONLY = frozenset({"job_state", "query_dead_letters"})
"""The scripts that write nothing (flag ``no-writes``: they run when memory is full too)."""


def function_of(name: str, raw: str) -> tuple[str, str]:
    """The function name and library text of script ``name`` (``raw``: as written)."""
    flags = ("no-writes",) if name in READS_ONLY else ("allow-oom",) if name in ALLOW_OOM else ()
    text = library(raw, _PLACEHOLDER, flags)  # built once: the name goes in after the digest
    function = f"{_LIBRARY_PREFIX}{name}_{hashlib.sha1(text.encode()).hexdigest()[:16]}"
    return function, text.replace(_PLACEHOLDER, function)


def functions_on(client: Client) -> bool:
    """Whether ``client`` calls scripts as functions (until its server says it has none)."""
    return _EVAL_ONLY not in vars(_holder(client))


def unrun(reply: Any) -> str | None:
    """Why ``reply`` refused a script call before it ran (:data:`NO_FUNCTIONS`,
    :data:`NO_FUNCTION`, :data:`NO_SCRIPT`); None for any other reply."""
    if not isinstance(reply, ResponseError):
        return None
    if isinstance(reply, NoScriptError):
        return NO_SCRIPT
    text = str(reply)
    if text.startswith("Function not found"):
        return NO_FUNCTION
    if "fcall" in text.lower() and (
        text.startswith("unknown command") or isinstance(reply, NoPermissionError)
    ):
        return NO_FUNCTIONS
    return None


async def provide(client: Client, batches: Coalescer, why: str, script: Script) -> bool:
    """Make good what refused a call (``why``, from :func:`unrun`): note that the server has
    no functions, or load the function's library or the script. Returns whether to send the
    call again as a function: not when the server has none, nor when it refused the library
    for want of memory (Redis takes a script then, and the call goes by EVALSHA)."""
    if why == NO_FUNCTIONS:
        vars(_holder(client))[_EVAL_ONLY] = True
        return False
    if why == NO_SCRIPT:
        if _cluster(client):  # to every master, as the client does it
            await client.script_load(script.source)
        else:  # through the batches too: after a restart every slot asks at once
            _raise(await batches.call(("SCRIPT", "LOAD", script.source), True))
        return False
    loads: dict[str, asyncio.Future[None]] = vars(_holder(client)).setdefault(_LOADING, {})
    function = script.function
    load = loads.get(function)
    if load is None:
        load = loads[function] = asyncio.ensure_future(_load(client, batches, script.library))
        load.add_done_callback(lambda _: loads.pop(function, None))
    try:
        await asyncio.shield(load)
    except OutOfMemoryError:
        return False
    except NoPermissionError:  # the user may call functions but not load them
        vars(_holder(client))[_EVAL_ONLY] = True
        return False
    return True


async def _load(client: Client, batches: Coalescer, library_text: str) -> None:
    if _cluster(client):  # to every master, as the client does it
        await client.function_load(library_text, replace=True)
        return
    loaded = await batches.call(("FUNCTION", "LOAD", library_text), True)
    # Loaded meanwhile by another process: the name says it is the same text.
    if not (isinstance(loaded, ResponseError) and "already exists" in str(loaded)):
        _raise(loaded)


async def libraries(client: Client, current: set[str]) -> dict[str, bool]:
    """The lazarus libraries the server holds (on a cluster: any of its masters), each with
    whether it is in ``current`` (this version's); none where it has no functions."""
    found: dict[str, bool] = {}
    for node in await _masters(client):
        try:
            listed = await client.execute_command(
                "FUNCTION", "LIST", "LIBRARYNAME", f"{_LIBRARY_PREFIX}*", **node
            )
        except ResponseError as error:
            if "unknown" in str(error).lower():  # Redis 6.2
                return {}
            raise
        for entry in listed:  # a dict (as redis-py parses it), or field-value pairs
            fields = entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2]))
            name = fields.get("library_name", fields.get(b"library_name"))
            name = name.decode() if isinstance(name, bytes) else str(name)
            found[name] = name in current
    return found


async def prune(client: Client, current: set[str]) -> list[str]:
    """Delete the lazarus libraries not in ``current`` (this version's) from the server (every
    master of a cluster); the names deleted. A version still running loads its own again at
    its next call."""
    gone = sorted(name for name, kept in (await libraries(client, current)).items() if not kept)
    for node in await _masters(client):
        for name in gone:
            try:
                await client.execute_command("FUNCTION", "DELETE", name, **node)
            except ResponseError as error:
                if "not found" not in str(error).lower():  # only on other masters
                    raise
    return gone


async def _masters(client: Client) -> list[dict[str, Any]]:
    """Per master of a cluster, the keyword that sends a command there; one empty one else."""
    if _cluster(client):
        await client.initialize()  # (a new client knows no nodes yet)
        return [{"target_nodes": node} for node in client.get_primaries()]
    return [{}]


def _raise(reply: Any) -> None:
    if isinstance(reply, Exception):
        raise reply


def _holder(client: Client) -> Any:
    """What a client's calling mode and loads are kept on: its pool, or the cluster client."""
    if _cluster(client):
        return client
    return cast(Redis, client).connection_pool


def _cluster(client: Client) -> TypeGuard[RedisCluster]:
    """Whether ``client`` is a cluster client; a plain Redis is told first, since isinstance
    against RedisCluster costs about a microsecond."""
    return type(client) is not Redis and isinstance(client, RedisCluster)
