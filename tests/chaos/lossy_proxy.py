"""A TCP proxy in front of a scenario's Redis, for one client, that loses the replies of some
script calls: the call runs in Redis, the client never hears of it and sends it again.

Every command the client writes is parsed (requests are arrays of bulk strings). When a call
of the watched script arrives, a seeded draw decides whether to lose its reply: the call goes
on to Redis, every reply from then on is withheld, and after a hold drawn from ``hold``
seconds the connection is dropped (both sides closed). The hold is what gives the rest of the
system time to act on what the call did before the client's re-send arrives. The proxy counts
the calls it saw, the ones whose reply it dropped, and, per job id, how many times an add of
that id reached Redis.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable

from ..faults import Proxy


def parse_requests(buffer: bytearray) -> list[list[bytes]]:
    """The whole commands at the front of ``buffer`` (removed from it); a partial one stays."""
    commands: list[list[bytes]] = []
    while buffer:
        if buffer[:1] != b"*":
            raise ValueError(f"not a RESP array: {bytes(buffer[:20])!r}")
        end = buffer.find(b"\r\n")
        if end < 0:
            break
        count, pos = int(buffer[1:end]), end + 2
        args: list[bytes] = []
        for _ in range(count):
            end = buffer.find(b"\r\n", pos)
            if end < 0:
                break
            assert buffer[pos : pos + 1] == b"$", bytes(buffer[pos : pos + 20])
            size = int(buffer[pos + 1 : end])
            if len(buffer) < end + 2 + size + 2:
                break
            args.append(bytes(buffer[end + 2 : end + 2 + size]))
            pos = end + 2 + size + 2
        if len(args) < count:
            break
        del buffer[:pos]
        commands.append(args)
    return commands


class LossyProxy(Proxy):
    """Between one client and Redis: drops the reply of about ``rate`` of the calls of the
    script named ``marker`` (its function's name in an ``FCALL``, or its SHA1 in an
    ``EVALSHA``), the connection cut ``hold`` seconds (a range)
    after the call went on to Redis. ``job_ids`` names the jobs a call adds (from its
    arguments), for the counts."""

    def __init__(
        self, redis_url: str, *, marker: bytes, job_ids: Callable[[list[bytes]], list[str]],
        rate: float, hold: tuple[float, float], seed: int,
    ) -> None:  # fmt: skip
        super().__init__(redis_url)
        self._marker = marker
        self._job_ids = job_ids
        self.rate = rate
        self.hold = hold
        self._rng = random.Random(seed)
        self.calls = 0  # calls of the script that reached Redis
        self.resent_calls = 0  # of which: carrying a job id an earlier call carried
        self.sent: Counter[str] = Counter()  # job id -> calls that carried it to Redis
        self.drops = 0  # connections cut
        self.dropped_calls = 0  # calls of the script whose reply was lost in a cut
        self.dropped_ids: Counter[str] = Counter()  # job id -> lost replies of calls adding it
        self.connections = 0
        self.errors: list[str] = []  # the proxy's own failures (a request it could not parse)
        self._closing = asyncio.Event()

    async def _end_connections(self) -> None:
        self._closing.set()  # every connection left ends
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _is_watched(self, command: list[bytes]) -> bool:
        return (
            len(command) > 2
            and command[0].upper() in (b"FCALL", b"EVALSHA")
            and command[1] == self._marker
        )

    def _note(self, commands: list[list[bytes]], unanswered: list[list[str]]) -> bool:
        """Count the watched calls among ``commands`` (added to ``unanswered``); whether the
        draw says to lose the reply of one."""
        lose = False
        for command in commands:
            if not self._is_watched(command):
                continue
            ids = self._job_ids(command)
            self.calls += 1
            self.resent_calls += any(self.sent[i] for i in ids)
            self.sent.update(ids)
            unanswered.append(ids)
            lose = lose or self._rng.random() < self.rate
        return lose

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        cut = asyncio.Event()
        unanswered: list[list[str]] = []  # the watched calls sent since the last reply
        requests = bytearray()

        async def to_redis() -> None:
            while data := await reader.read(65536):
                requests.extend(data)
                if self._note(parse_requests(requests), unanswered) and not cut.is_set():
                    cut.set()
                if cut.is_set():  # every call on its way loses its reply
                    self._lose(unanswered)
                up_writer.write(data)  # the call runs in Redis
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                if cut.is_set():  # withheld: lost with the connection
                    continue
                unanswered.clear()  # a connection's calls are answered in order, whole
                writer.write(data)
                await writer.drain()

        async def cutter() -> None:
            await cut.wait()
            await asyncio.sleep(self._rng.uniform(*self.hold))  # the fault's own hold
            self.drops += 1

        async def closing() -> None:
            await self._closing.wait()

        pipes = [asyncio.create_task(p()) for p in (to_redis, to_client, cutter, closing)]
        try:  # either side closing (or the cut, or the proxy's end) ends them all
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await self._end(pipes, (writer, up_writer))
            self._tasks.discard(task)

    def _lose(self, unanswered: list[list[str]]) -> None:
        self.dropped_calls += len(unanswered)
        for ids in unanswered:
            self.dropped_ids.update(ids)
        unanswered.clear()

    async def _end(
        self, pipes: list[asyncio.Task[None]], streams: tuple[asyncio.StreamWriter, ...]
    ) -> None:
        """Stop the pipes of a connection, noting their failures, and close both sides."""
        for pipe in pipes:
            pipe.cancel()
        for outcome in await asyncio.gather(*pipes, return_exceptions=True):
            if isinstance(outcome, Exception) and not isinstance(outcome, OSError):
                self.errors.append(f"{type(outcome).__name__}: {outcome}")
        for stream in streams:
            stream.close()
