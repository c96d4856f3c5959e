"""A bulk replayer process of the fault suite: ``python replayer.py <redis url> <log file>``
replays every replayable dead letter of ``dlq`` (prefix ``chaos``) into its source queue with
``replay_all_dead_letters`` in batches of 50, appending ``P <done>`` to the log file after
each batch (one ``write(2)``, whole even if the process is killed right after). On Redis
Cluster, with the source queue in another slot, each batch is two steps (``replay_out``, then
each new job's ``replay_in``): a SIGKILL between them leaves moves for ``settle_dead_letters``
to finish."""

from __future__ import annotations

import asyncio
import os
import sys

from lazarus import Queue

BATCH = 50


async def main(url: str, log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    dlq = Queue("dlq", connection=url, prefix="chaos")
    try:
        await dlq.replay_all_dead_letters(
            batch_size=BATCH,
            on_progress=lambda done: os.write(log, f"P {done}\n".encode()),
            actor="operator:chaos",
        )
        os.write(log, b"E\n")  # the whole walk ended
    finally:
        await dlq.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
