"""A redriver process of the fault suite: ``python redriver.py <redis url>`` redrives the
dead letter queue ``dlq`` (prefix ``chaos``) with one conditional rule whose gate pauses
50 ms, so that the process holds the claims of a batch for a while each time: a SIGKILL then
lands while it holds claims, some of them on dead letters it has not replayed yet."""

from __future__ import annotations

import asyncio
import sys

from lazarus.redrive import Redriver, RedriveRule

CLAIM_MS = 2_000  # short, so that the claims of a killed redriver expire within the scenario


async def slow_gate() -> bool:
    await asyncio.sleep(0.05)
    return True


def build(url: str) -> Redriver:
    """The redriver both the killed process and its successor run."""
    rule = RedriveRule(strategy="conditional", gate=slow_gate)
    return Redriver("dlq", [rule], connection=url, prefix="chaos", poll_interval=0.01,
                    batch_size=10, claim_ms=CLAIM_MS)  # fmt: skip


async def main(url: str) -> None:
    await build(url).run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
