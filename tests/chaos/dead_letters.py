"""Dead letters for the replay and purge races: made the way production makes them (a worker
dead-letters failing jobs), and read back through the public dead letter API only."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from lazarus import Job, Queue, Worker

from .audit import all_dead_letters
from .harness import PREFIX, Server, wait_for
from .redis_server import RedisServer
from .report import Findings

SOURCE, DLQ = "src", "dlq"
ERRORS = {"ValueError": ValueError, "TimeoutError": TimeoutError}


async def _fail(job: Job) -> None:
    raise ERRORS[job.data["error"]](f"dead letter {job.data['i']}")


async def make_dead_letters(
    server: RedisServer, letters: list[tuple[int, str, str]], source_name: str = SOURCE
) -> None:
    """Dead-letter one job per ``(tag, job name, error type)`` from ``source_name`` into
    ``dlq``; each payload is ``{"i": tag, "error": ...}``. Returns once the source queue has
    no job left to dead-letter."""
    source = Queue(source_name, connection=server.url, prefix=PREFIX)
    await source.add_bulk(
        {"name": name, "data": {"i": tag, "error": error}, "job_id": f"d{tag}"}
        for tag, name, error in letters
    )
    worker = Worker(source_name, _fail, connection=server.url, prefix=PREFIX, concurrency=50,
                    dead_letter_queue=DLQ, block_timeout=0.5)  # fmt: skip
    try:

        async def all_dead() -> bool:
            counts = await source.get_job_counts()
            return counts["waiting"] + counts["delayed"] + counts["active"] == 0

        assert await wait_for(all_dead, 60), "the dead letters were not made in 60 s"
    finally:
        await worker.close()
        await source.close()


async def dead_letter_each(
    server: Server, source: Queue, payloads: list[dict[str, Any]], dlq_name: str
) -> dict[str, int]:
    """Add one job per payload to ``source`` and let a worker dead-letter each into
    ``dlq_name``; returns each dead letter's id with its payload's ``i``."""
    await source.add_bulk({"name": "n", "data": data} for data in payloads)
    maker = Worker(source.name, _fail_for_good, connection=server.url, prefix=PREFIX,
                   concurrency=50, dead_letter_queue=dlq_name, block_timeout=0.5)  # fmt: skip
    dlq = Queue(dlq_name, connection=server.url, prefix=PREFIX)
    try:

        async def arrived() -> bool:
            return await dlq.get_dead_letter_count() >= len(payloads)

        assert await wait_for(arrived, 60), f"{len(payloads)} dead letters were not made"
        return {letter.id: letter.original_data["i"] for letter in await all_dead_letters(dlq)}
    finally:
        await maker.close()
        await dlq.close()


async def _fail_for_good(job: Job) -> None:
    raise ValueError(f"dead letter {job.data['i']}")


@dataclasses.dataclass
class Where:
    """Where every tagged payload is: dead letters still in ``dlq``, jobs made in ``src``."""

    letters: Counter[int]
    jobs: Counter[int]
    replay_counts: Counter[int]  # tag -> replay_count of a job made (1 when replayed once)

    @classmethod
    async def look(cls, server: RedisServer) -> Where:
        dlq = Queue(DLQ, connection=server.url, prefix=PREFIX)
        source = Queue(SOURCE, connection=server.url, prefix=PREFIX)
        try:
            letters = Counter(j.original_data["i"] for j in await all_dead_letters(dlq))
            made = await source.get_waiting()
        finally:
            await dlq.close()
            await source.close()
        return cls(
            letters,
            Counter(j.data["i"] for j in made),
            Counter({j.data["i"]: j.replay_count for j in made}),
        )


def judge_letters(
    findings: Findings, where: Where, tags: dict[int, str], replayed: Counter[int]
) -> None:
    """Fill ``findings`` for dead letters tagged ``tags`` (tag -> ``"replay"``: should have
    been replayed; ``"purge"``: purged; ``"either"``: one or the other; ``"keep"``:
    untouched; a trailing ``?`` lets the dead letter also stay, for one that arrived while
    the race ran). ``replayed`` counts, per tag, the replay calls that reported success."""
    wrong = findings.broken.setdefault("handled against its filter", [])
    told = findings.broken.setdefault("replay reported other than what happened", [])
    for tag, wanted in tags.items():
        fate, may_stay = wanted.rstrip("?"), wanted.endswith("?")
        present, made = where.letters[tag], where.jobs[tag]
        name = str(tag)
        if present > 1 or made > 1 or replayed[tag] > 1:
            findings.duplicated.append(name)
        elif present and made:
            findings.half_moved.append(name)
        elif not present and not made and fate in ("replay", "keep"):
            findings.lost.append(name)  # gone, and no replay made a job of it
        elif present and fate != "keep" and not may_stay:
            findings.undrained.append(name)  # matched, yet skipped
        elif made and fate in ("purge", "keep"):
            wrong.append(name)
        if made and where.replay_counts[tag] != 1:
            wrong.append(name)
        if replayed[tag] != made:
            told.append(name)
