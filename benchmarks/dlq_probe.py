"""Redis's worst pause during each phase of ``dlq_scale.py``, seen two ways.

- From outside: a separate process sends ``PING`` on its own connection about every
  millisecond and keeps the longest round trip since it was last asked. A process of its own,
  so the benchmark's event loop and the GIL never delay a reply being read, and raised in
  priority (``nice -10``, where the OS allows it) so that on a 2-core machine shared by Redis,
  the benchmark's client and the prober, a reply is read when it arrives rather than when the
  client's time slice ends. The figure still includes any time the OS does not run Redis.
- From inside: ``SLOWLOG`` with a 1 ms threshold names the slowest command of the phase and
  its execution time on the server (scripts by name), which no client-side noise inflates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import urlparse

from redis.asyncio import Redis

from lazarus import _scripts

PING_INTERVAL = 0.001
PROBE_NICE = -10
SLOWLOG_US = 1000


def _ping_loop(host: str, port: int, conn: Connection) -> None:
    """Ping until told to stop; answer each ``"mark"`` with (worst round trip in seconds,
    pings) since the previous one. First sends its niceness (see the module's docstring)."""
    with contextlib.suppress(OSError):
        os.nice(PROBE_NICE)
    conn.send(os.nice(0))
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        worst, count = 0.0, 0
        while True:
            if conn.poll():
                if conn.recv() == "stop":
                    return
                conn.send((worst, count))
                worst, count = 0.0, 0
            started = time.perf_counter()
            sock.sendall(b"PING\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                reply += sock.recv(64)
            worst = max(worst, time.perf_counter() - started)
            count += 1
            time.sleep(PING_INTERVAL)


@dataclasses.dataclass
class Pause:
    """The worst pause of one phase: PING round trip and slowest command (ms)."""

    phase: str
    ping_ms: float
    pings: int
    slowest_ms: float
    slowest: str
    seconds: float
    judged: bool
    # Redis's CPU time over the phase divided by its script calls: what one call holds Redis
    # for on an idle machine, at most (the phase's other commands are counted in too).
    cpu_per_script_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class PauseProbe:
    """Start with :meth:`start`; wrap each phase in :meth:`phase`; :attr:`pauses` holds them."""

    def __init__(self, url: str, client: Redis, *, label: str = "") -> None:
        self._url = url
        self._label = label
        self._client = client
        self._process: Any = None
        self._conn: Connection | None = None
        self.pauses: list[Pause] = []
        self.niceness: int | None = None  # the prober's, once started
        self._names = {
            key: n
            for n in _script_names()
            for key in (_scripts.load(n).sha, _scripts.load(n).function)
        }

    async def start(self) -> None:
        await self._client.config_set("slowlog-log-slower-than", SLOWLOG_US)
        await self._client.config_set("slowlog-max-len", 1024)
        parsed = urlparse(self._url)
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(
            target=_ping_loop, args=(parsed.hostname, parsed.port, child), daemon=True
        )
        self._process.start()
        self.niceness = self._conn.recv()

    def _mark(self) -> tuple[float, int]:
        assert self._conn is not None
        self._conn.send("mark")
        result: tuple[float, int] = self._conn.recv()
        return result

    @contextlib.asynccontextmanager
    async def phase(self, name: str, *, judged: bool = True) -> AsyncIterator[None]:
        """Record the worst pause while the body runs (``judged=False`` for set-up phases,
        whose pauses are the benchmark's own doing)."""
        # The probe's own commands run outside the phase: a reset of a full SLOWLOG can take
        # a few milliseconds itself.
        await self._client.slowlog_reset()
        cpu, scripts = await self.redis_seconds(), await self._script_calls()
        self._mark()
        started = time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        worst, count = self._mark()
        cpu, scripts = await self.redis_seconds() - cpu, await self._script_calls() - scripts
        slowest_ms, slowest = await self._slowest()
        per_script = cpu * 1000 / scripts if scripts else None
        pause = Pause(name, worst * 1000, count, slowest_ms, slowest, seconds, judged, per_script)
        self.pauses.append(pause)
        print(f"[{self._label}] {pause}", file=sys.stderr, flush=True)

    async def _slowest(self) -> tuple[float, str]:
        entries = await self._client.slowlog_get(1024)
        if not entries:
            return 0.0, ""
        entries = [e for e in entries if not _own(e["command"])]
        if not entries:
            return 0.0, ""
        top = max(entries, key=lambda e: e["duration"])
        return top["duration"] / 1000, self._describe(top["command"])

    def _describe(self, command: bytes | str) -> str:
        words = (command.decode() if isinstance(command, bytes) else command).split()
        if words and words[0].upper() in ("EVALSHA", "FCALL") and len(words) > 1:
            return self._names.get(words[1], f"{words[0]} {words[1][:24]}")
        return " ".join(words[:2])[:60]

    async def redis_seconds(self) -> float:
        """The CPU time Redis's main thread has used so far (the PINGs' share is small: about
        a thousand a second)."""
        cpu = await self._client.info("cpu")
        return float(cpu["used_cpu_user_main_thread"]) + float(cpu["used_cpu_sys_main_thread"])

    async def _script_calls(self) -> int:
        stats = await self._client.info("commandstats")
        return sum(
            int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("fcall", "evalsha", "eval")
        )

    def stop(self) -> None:
        if self._conn is not None and self._process is not None:
            self._conn.send("stop")
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.terminate()
        self._process = self._conn = None


def _own(command: bytes | str) -> bool:
    """Whether a SLOWLOG entry is one of the probe's own commands."""
    text = command.decode() if isinstance(command, bytes) else command
    return text.split(" ", 1)[0].upper() in ("SLOWLOG", "INFO", "CONFIG")


def _script_names() -> list[str]:
    from importlib import resources

    folder = resources.files("lazarus._scripts")
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".lua"))
