"""Queue names with an explicit hash tag: ``{payments}-dlq`` shares the Redis Cluster slot of
``payments``; braces anywhere else are refused naming the field; names without braces keep
their key names."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from lazarus import Job, Queue, QueueEvents, UnrecoverableError, Worker
from lazarus._keys import QueueKeys

from .conftest import wait_until

BAD = ["a{b}", "{}x", "{a}{b}", "{a}b}", "{{a}}", "x{a}", "{a", "{ }x", "{a}:b"]


def test_names_without_braces_keep_their_key_names() -> None:
    keys = QueueKeys("lazarus", "payments")

    assert (keys.wait, keys.job("1")) == ("lazarus:{payments}:wait", "lazarus:{payments}:job:1")


@pytest.mark.parametrize("name", ["{payments}-dlq", "{payments}", "{payments}.retry"])
def test_every_key_of_a_tagged_queue_shares_the_slot_of_its_tag(name: str) -> None:
    tagged, plain = QueueKeys("lazarus", name), QueueKeys("lazarus", "payments")
    keys = [*tagged.group, *tagged.dead_letter_group, tagged.dl_index("s", "pending"),
            tagged.reply("w", "0"), tagged.repeat("r")]  # fmt: skip

    assert {key_slot(k.encode()) for k in keys} == {key_slot(plain.wait.encode())}
    assert len({tagged.wait, plain.wait}) == (1 if name == "{payments}" else 2)


@pytest.mark.parametrize("name", BAD)
async def test_misplaced_braces_are_refused_naming_the_field(name: str, redis_url: str) -> None:
    with pytest.raises(ValueError, match="queue name"):
        Queue(name, connection=redis_url)
    with pytest.raises(ValueError, match="queue name"):
        QueueEvents(name, connection=redis_url)
    with pytest.raises(ValueError, match="dead_letter_queue"):
        Worker("jobs", lambda job: None, connection=redis_url, dead_letter_queue=name,
               autorun=False)  # fmt: skip


async def test_a_tagged_dead_letter_queue_takes_its_queues_dead_letters(
    redis_url: str, prefix: str
) -> None:
    # Given a tagged queue and its dead letter queue named with the same hash tag
    queue = Queue("{jobs}.main", connection=redis_url, prefix=prefix)
    dlq = Queue("{jobs}-dlq", connection=redis_url, prefix=prefix)
    job = await queue.add("n", {"v": 1})

    async def reject(running: Job) -> None:
        await running.log("about to fail")
        raise UnrecoverableError("no")

    # When the job fails for good, then it is a dead letter of the tagged queue
    worker = Worker("{jobs}.main", reject, connection=redis_url, prefix=prefix,
                    dead_letter_queue="{jobs}-dlq", block_timeout=0.2)  # fmt: skip

    async def arrived() -> bool:
        return await dlq.get_dead_letter_count() == 1

    await wait_until(arrived, message="the dead letter")
    await worker.close()
    (letter,) = await dlq.get_dead_letter_jobs()
    assert letter.dead_letter is not None
    assert letter.dead_letter.original_job_id == job.id
    assert (await dlq.get_job_logs(letter.id)).logs == ["about to fail"]
    await queue.close()
    await dlq.close()
