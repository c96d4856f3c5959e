"""The dead letters of ``dlq_scale.py``: written in lazarus 0.1's layout, then indexed by
``Queue.migrate_dead_letters()`` (the upgrade path, run by the real Lua).

Making a million dead letters through real workers takes too long, so each one is written as
lazarus 0.1 wrote it (``docs/redis-keys.md``, "A dead letter's fields"): a job hash with the
``dlq:*`` fields and ``dlq:deadLetteredAt`` spread over the last 7 days, its id LPUSHed to the
dead letter queue's waiting list, all by pipelined HSET / LPUSH over one raw connection.

The values are drawn independently and uniformly: 20 job names (5 domains of 4), 10 error
types, 5 source queues and 4 reasons, so one error type matches about 10 % of the store and a
name + error type + source queue about 0.1 %. Payloads are about 300 bytes of JSON; one in
ten carries :data:`PAYLOAD_NEEDLE`, and the failure message of one error type in ten carries
:data:`REASON_NEEDLE`. :data:`NO_MATCH` is in none of them.
"""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import hiredis

DLQ = "bench-dlq"
PREFIX = "bench"
DOMAINS = ("email", "billing", "orders", "reports", "sync")
NAMES = tuple(f"{d}.{a}" for d in DOMAINS for a in ("send", "retry", "export", "notify"))
ERROR_TYPES = (
    "TimeoutError", "ConnectionResetError", "ValueError", "KeyError", "PermissionError",
    "HTTPError", "RateLimitError", "ValidationError", "IntegrityError", "RuntimeError",
)  # fmt: skip
SOURCES = ("payments", "emails", "orders", "reports", "webhooks")
REASONS = ("attempts_exhausted", "unrecoverable", "discarded", "stalled")
SPAN_MS = 7 * 24 * 3600 * 1000
PAYLOAD_BYTES = 300
PAYLOAD_NEEDLE = '"tier":"gold"'
REASON_NEEDLE = "connection reset by peer"
NO_MATCH = "zq-no-such-text-7f3a"
_MESSAGES = {
    "TimeoutError": "upstream did not answer within 30 s (api-{n}.internal)",
    "ConnectionResetError": "[Errno 104] Connection reset by peer (db-{n}.internal:5432)",
    "ValueError": "invalid amount {n} for currency EUR",
    "KeyError": "'customer_{n}'",
    "PermissionError": "token of account {n} lacks scope payments:write",
    "HTTPError": "502 Bad Gateway from https://partner-{n}.example.com/v2/hooks",
    "RateLimitError": "429 Too Many Requests: retry after {n} s",
    "ValidationError": "field 'email' of record {n} is not an address",
    "IntegrityError": "duplicate key value violates unique constraint orders_pkey ({n})",
    "RuntimeError": "worker state {n} was not expected here",
}
_FRAMES = (
    ("/app/.venv/lib/python3.11/site-packages/lazarus/_execution.py", 72, "run",
     "result = await processor(job)"),
    ("/app/service/handlers/{domain}.py", 118, "handle", "return await self._{action}(job.data)"),
    ("/app/service/handlers/{domain}.py", 204, "_{action}",
     "response = await self.client.post(url, json=body, timeout=30)"),
    ("/app/.venv/lib/python3.11/site-packages/httpx/_client.py", 1619, "send",
     "response = await self._send_handling_auth("),
)  # fmt: skip


def stack_trace(name: str, error_type: str, message: str) -> str:
    """A traceback as the worker records it (``format_stack``), as a one-entry JSON array."""
    domain, action = name.split(".")
    lines = ["Traceback (most recent call last):\n"]
    for path, line, func, code in _FRAMES:
        where = path.format(domain=domain)
        lines.append(f'  File "{where}", line {line}, in {func.format(action=action)}\n')
        lines.append(f"    {code.format(action=action)}\n")
    lines.append(f"{error_type}: {message}\n")
    return json.dumps(["".join(lines)])


def payload(bits: int, i: int) -> str:
    """About :data:`PAYLOAD_BYTES` of compact JSON from 128 random ``bits``; one in ten holds
    :data:`PAYLOAD_NEEDLE`."""
    tier = "gold" if bits % 10 == 0 else ("basic", "silver")[bits >> 4 & 1]
    skus = (bits >> 8) % 10**6, (bits >> 28) % 10**6
    text = (
        f'{{"order_id":"ord_{i:010d}","customer":{{"id":"cus_{bits >> 48 & 0xFFFFFFFFFFFF:012x}",'
        f'"email":"user{(bits >> 96) % 100_000}@example.com","tier":"{tier}"}},'
        f'"items":[{{"sku":"SKU-{skus[0]:06d}","qty":{1 + (bits >> 5) % 4},'
        f'"price_cents":{100 + (bits >> 40) % 99_900}}},{{"sku":"SKU-{skus[1]:06d}",'
        f'"qty":{1 + (bits >> 7) % 4},"price_cents":{100 + (bits >> 60) % 99_900}}}],'
        f'"currency":"EUR","note":"'
    )
    return text + "x" * max(0, PAYLOAD_BYTES - len(text) - 2) + '"}'


def dead_letter_times(n: int, now_ms: int, seed: int) -> list[int]:
    """``n`` dead-lettered-at times (ms) spread uniformly over the 7 days before ``now_ms``,
    oldest first (the order lazarus 0.1 LPUSHed them in)."""
    rng = random.Random(seed + 1)
    return sorted(now_ms - rng.randrange(SPAN_MS) for _ in range(n))


def records(n: int, now_ms: int, seed: int) -> Iterator[tuple[str, list[str]]]:
    """``(dead letter id, HSET field-value list)`` of ``n`` dead letters in the 0.1 layout."""
    rng = random.Random(seed)
    stacks = {(nm, et): stack_trace(nm, et, _MESSAGES[et].format(n=7)) for nm in NAMES
              for et in ERROR_TYPES}  # fmt: skip
    opts = '{"attempts":3,"backoff":{"type":"exponential","delay":1000}}'
    for i, at in enumerate(dead_letter_times(n, now_ms, seed)):
        pick = rng.getrandbits(64)
        name, error_type = NAMES[pick % 20], ERROR_TYPES[(pick >> 8) % 10]
        source, reason = SOURCES[(pick >> 16) % 5], REASONS[(pick >> 24) % 4]
        message = _MESSAGES[error_type].format(n=(pick >> 32) % 1000)
        started = at - 50 - (pick >> 42) % 30_000
        attempt = (
            f'[{{"attempt":3,"startedAt":{started},"finishedAt":{at},"worker":"host-7:4f1c2a",'
            f'"outcome":"failed","error":{json.dumps(message)},"errorType":"{error_type}"}}]'
        )
        fields = [
            "name", name, "data", payload(rng.getrandbits(128), i), "opts", "{}",
            "timestamp", str(at), "priority", "0", "delay", "0", "atm", "1", "attemptsMade", "0",
            "dlq:sourceQueue", source, "dlq:originalJobId", f"{rng.getrandbits(128):032x}",
            "dlq:failedReason", message, "dlq:errorType", error_type,
            "dlq:stacktrace", stacks[(name, error_type)], "dlq:attempts", attempt,
            "dlq:attemptsMade", "3", "dlq:deadLetteredAt", str(at),
            "dlq:originalTimestamp", str(started - 60_000), "dlq:originalOpts", opts,
            "dlq:reason", reason, "dlq:replayCount", "0", "dlq:priority", "0",
            "dlq:delay", "0", "dlq:atm", "3",
        ]  # fmt: skip
        yield f"{rng.getrandbits(112):028x}", fields  # 28 hex digits, as lazarus makes them


def write_legacy(url: str, n: int, *, seed: int = 7, chunk: int = 1000) -> float:
    """Write ``n`` dead letters in the 0.1 layout; returns the seconds it took. Pipelined:
    ``chunk`` dead letters (an HSET and an LPUSH each) per write, then their replies."""
    parsed = urlparse(url)
    wait = f"{PREFIX}:{{{DLQ}}}:wait"
    job_prefix = f"{PREFIX}:{{{DLQ}}}:job:"
    started = time.perf_counter()
    with socket.create_connection((parsed.hostname, parsed.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = hiredis.Reader()
        batch: list[bytes] = []
        for dl_id, fields in records(n, int(time.time() * 1000), seed):
            batch.append(hiredis.pack_command(("HSET", job_prefix + dl_id, *fields)))
            batch.append(hiredis.pack_command(("LPUSH", wait, dl_id)))
            if len(batch) >= 2 * chunk:
                _send(sock, reader, batch)
                batch = []
        if batch:
            _send(sock, reader, batch)
    return time.perf_counter() - started


def _send(sock: socket.socket, reader: hiredis.Reader, commands: list[bytes]) -> None:
    sock.sendall(b"".join(commands))
    for _ in commands:
        reply = reader.gets()
        while reply is False:
            reader.feed(sock.recv(1 << 16))
            reply = reader.gets()
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"loading dead letters failed: {reply}")
