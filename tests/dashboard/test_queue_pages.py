"""The pages of any queue: jobs by state, a job's page, retry, run now, pause, clean and
drain, the workers, auto-refresh, and "no such queue"."""

from __future__ import annotations

import datetime
import html
import re

import httpx
import pytest

from lazarus import Job, Queue
from lazarus.workers import list_workers
from tests.conftest import wait_until

from .conftest import MakeWorker, csrf_of

JOB_LINK = re.compile(r'class="job-link" href="[^"]*/jobs/([^"?]+)"')


async def failed_jobs(queue: Queue, make_worker: MakeWorker, count: int) -> list[str]:
    added = await queue.add_bulk([{"name": "charge", "data": {"n": n}} for n in range(count)])

    async def boom(job: Job) -> None:
        raise RuntimeError(f"card {job.data['n']} declined")

    worker = make_worker(boom)

    async def failed() -> bool:
        return await queue.get_failed_count() == count

    await wait_until(failed)
    await worker.close()
    return [job.id for job in added]


async def test_a_mistyped_queue_gets_a_404_page_saying_so(client: httpx.AsyncClient) -> None:
    for path in ("/dashboard/queues/nope", "/dashboard/queues/nope/dead-letters",
                 "/dashboard/queues/nope/jobs/1"):  # fmt: skip
        response = await client.get(path)
        assert response.status_code == 404, path
        assert "There is no queue called &#39;nope&#39;" in response.text, path
        assert "Nothing has failed" not in response.text


async def test_the_queue_page_lists_jobs_by_state_a_page_at_a_time(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.pause()
    await queue.add_bulk([{"name": "n", "data": i, "job_id": f"j{i:02}"} for i in range(30)])
    first = await client.get("/dashboard/queues/jobs?state=waiting")
    assert first.status_code == 200
    assert JOB_LINK.findall(first.text) == [f"j{i:02}" for i in range(29, 4, -1)]
    assert "Next →" in first.text and "badge paused" in first.text
    second = await client.get("/dashboard/queues/jobs?state=waiting&page=2")
    assert JOB_LINK.findall(second.text) == ["j04", "j03", "j02", "j01", "j00"]
    assert "Next →" not in second.text


async def test_a_queue_without_live_workers_is_not_shown_running(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add("n")
    assert "no workers" in (await client.get("/dashboard")).text
    worker = make_worker(lambda job: None, name="w-7")

    async def registered() -> bool:
        return bool(await list_workers(queue.client, queue.keys))

    await wait_until(registered)
    overview = (await client.get("/dashboard")).text
    assert 'class="badge running"' in overview
    page = (await client.get("/dashboard/queues/jobs")).text
    assert "w-7" in page
    await worker.close()
    assert "no workers" in (await client.get("/dashboard/queues/jobs")).text


async def test_the_queue_page_charts_jobs_completed_and_failed_per_minute(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await failed_jobs(queue, make_worker, 3)
    await queue.add("n")
    worker = make_worker(lambda job: None)

    async def completed() -> bool:
        return await queue.get_completed_count() == 1

    await wait_until(completed)
    await worker.close()

    page = html.unescape((await client.get("/dashboard/queues/jobs")).text)
    assert "Since the queue was created: 1 completed, 3\nfailed for good" in page
    assert "Jobs completed per minute in jobs: 1 in the last 60 minutes" in page
    assert "Jobs failed for good per minute in jobs: 3 in the last 60 minutes" in page
    # One bar in each chart, titled with its minute and count
    assert re.search(r"<title>\d\d:\d\d UTC: 3 jobs failed for good</title>", page) or (
        "2 jobs failed for good" in page and "1 job failed for good" in page
    )  # a minute may have turned between the failures
    assert re.search(r"<title>\d\d:\d\d UTC: 1 job completed</title>", page)


async def test_retry_one_failed_job_from_its_page(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    (job_id,) = await failed_jobs(queue, make_worker, 1)
    page = await client.get(f"/dashboard/queues/jobs/jobs/{job_id}")
    assert page.status_code == 200
    assert "card 0 declined" in page.text and '"n": 0' in html.unescape(page.text)
    token = await csrf_of(client, f"/dashboard/queues/jobs/jobs/{job_id}")
    response = await client.post(f"/dashboard/queues/jobs/jobs/{job_id}/retry",
                                 data={"csrf": token})  # fmt: skip
    assert response.status_code == 303
    assert await queue.get_job_state(job_id) == "waiting"


async def test_run_a_delayed_job_now_from_its_page_and_from_the_delayed_jobs(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.pause()
    first = await queue.add("n", None, delay=3_600_000)
    second = await queue.add("n", None, delay=3_600_000)
    page = await client.get(f"/dashboard/queues/jobs/jobs/{first.id}")
    assert "Run now" in page.text
    token = await csrf_of(client, f"/dashboard/queues/jobs/jobs/{first.id}")

    from_page = await client.post(f"/dashboard/queues/jobs/jobs/{first.id}/promote",
                                  data={"csrf": token})  # fmt: skip
    from_list = await client.post(f"/dashboard/queues/jobs/jobs/{second.id}/promote",
                                  data={"csrf": token, "back": "queue"})  # fmt: skip

    assert from_page.status_code == 303 and from_list.status_code == 303
    assert from_list.headers["location"].startswith("/dashboard/queues/jobs?state=delayed")
    assert [await queue.get_job_state(j.id) for j in (first, second)] == ["paused", "paused"]
    again = await client.post(
        f"/dashboard/queues/jobs/jobs/{first.id}/promote",
        data={"csrf": token, "back": "queue"},
        follow_redirects=True,
    )
    assert "Could not promote job" in again.text


async def test_retry_all_failed_jobs_after_confirming(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await failed_jobs(queue, make_worker, 3)
    confirm = await client.get("/dashboard/queues/jobs/retry-failed")
    assert "3 jobs of <strong>jobs</strong> failed for good" in confirm.text
    token = await csrf_of(client, "/dashboard/queues/jobs/retry-failed")
    unconfirmed = await client.post("/dashboard/queues/jobs/retry-failed", data={"csrf": token})
    assert "not+confirmed" in unconfirmed.headers["location"]
    assert await queue.get_failed_count() == 3
    done = await client.post("/dashboard/queues/jobs/retry-failed",
                             data={"csrf": token, "confirm": "yes"})  # fmt: skip
    assert "Retried+3+failed+jobs" in done.headers["location"]
    assert await queue.get_failed_count() == 0


async def test_run_every_delayed_job_now_after_confirming(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.pause()
    delayed = [await queue.add("n", None, delay=3_600_000 + i) for i in range(3)]
    waiting = (await client.get("/dashboard/queues/jobs?state=waiting")).text
    listed = (await client.get("/dashboard/queues/jobs?state=delayed")).text
    assert "promote-delayed" not in waiting and "Run 3 delayed now…" in listed
    confirm = await client.get("/dashboard/queues/jobs/promote-delayed")
    assert "Run 3 delayed jobs of <strong>jobs</strong> now?" in confirm.text
    token = await csrf_of(client, "/dashboard/queues/jobs/promote-delayed")

    unconfirmed = await client.post("/dashboard/queues/jobs/promote-delayed",
                                    data={"csrf": token})  # fmt: skip
    assert "not+confirmed" in unconfirmed.headers["location"]
    assert await queue.get_delayed_count() == 3
    done = await client.post("/dashboard/queues/jobs/promote-delayed",
                             data={"csrf": token, "confirm": "yes"})  # fmt: skip

    assert done.status_code == 303
    assert done.headers["location"].startswith("/dashboard/queues/jobs?state=waiting")
    assert "Promoted+3+delayed+jobs." in done.headers["location"]
    assert [await queue.get_job_state(j.id) for j in delayed] == ["paused"] * 3
    none_left = (await client.get("/dashboard/queues/jobs?state=delayed")).text
    assert "promote-delayed" not in none_left
    missing = await client.get("/dashboard/queues/nope/promote-delayed")
    assert missing.status_code == 404


@pytest.mark.parametrize("action", ["pause", "resume"])
async def test_pause_and_resume(client: httpx.AsyncClient, queue: Queue, action: str) -> None:
    await queue.add("n")
    if action == "resume":
        await queue.pause()
    token = await csrf_of(client, "/dashboard/queues/jobs")
    response = await client.post(f"/dashboard/queues/jobs/{action}", data={"csrf": token})
    assert response.status_code == 303
    assert await queue.is_paused() is (action == "pause")


async def test_drain_and_clean_remove_jobs_after_confirming(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await failed_jobs(queue, make_worker, 2)
    await queue.add_bulk([{"name": "n"}, {"name": "m", "delay": 60_000}])
    assert "Delete the 2 jobs" in (await client.get("/dashboard/queues/jobs/drain")).text
    token = await csrf_of(client, "/dashboard/queues/jobs/drain")
    await client.post("/dashboard/queues/jobs/drain", data={"csrf": token, "confirm": "yes"})
    counts = await queue.get_job_counts()
    assert (counts["waiting"], counts["delayed"], counts["failed"]) == (0, 0, 2)
    form = {"csrf": token, "confirm": "yes", "state": "failed", "grace_s": "0"}
    response = await client.post("/dashboard/queues/jobs/clean", data=form)
    assert "Removed+2+failed+jobs" in response.headers["location"]
    assert await queue.get_failed_count() == 0


@pytest.mark.parametrize("grace_s", ["", "soon", "-1", "1.5", "²"])
async def test_clean_with_a_grace_period_that_is_no_whole_number_removes_nothing(
    client: httpx.AsyncClient, queue: Queue, grace_s: str
) -> None:
    await queue.pause()
    await queue.add("n", None)
    token = await csrf_of(client, "/dashboard/queues/jobs/clean")

    form = {"csrf": token, "confirm": "yes", "state": "waiting", "grace_s": grace_s}
    response = await client.post("/dashboard/queues/jobs/clean", data=form)

    assert response.status_code == 303
    assert "Nothing+was+cleaned" in response.headers["location"]
    assert (await queue.get_job_counts())["paused"] == 1


async def test_drain_of_a_queue_that_holds_dead_letters_leaves_them(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter queue that is a queue of its own too: one dead letter, one job
    await queue.add("charge")

    async def boom(job: Job) -> None:
        raise RuntimeError("declined")

    make_worker(boom, dead_letter_queue=dlq.name)

    async def dead_lettered() -> bool:
        return await dlq.get_dead_letter_count() == 1

    await wait_until(dead_lettered)
    await dlq.add("n")

    # Then the drain offers the one job, and deletes only it
    page = "/dashboard/queues/jobs-dlq/drain"
    assert "Delete the 1 job" in (await client.get(page)).text
    token = await csrf_of(client, page)
    response = await client.post(page, data={"csrf": token, "confirm": "yes"})
    assert "removed+1+waiting+job." in response.headers["location"]
    assert await dlq.get_dead_letter_count() == 1
    assert (await dlq.get_job_counts())["waiting"] == 1  # the dead letter


async def test_auto_refresh_is_a_meta_refresh_within_the_csp(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.add("n")
    plain = await client.get("/dashboard/queues/jobs")
    assert 'http-equiv="refresh"' not in plain.text
    refreshing = await client.get("/dashboard/queues/jobs?refresh=5")
    assert '<meta http-equiv="refresh" content="5">' in refreshing.text
    assert "script-src" not in refreshing.headers["content-security-policy"]
    assert "<script" not in refreshing.text
    odd = await client.get("/dashboard/queues/jobs?refresh=1")
    assert 'http-equiv="refresh"' not in odd.text


async def test_a_queue_whose_name_holds_a_slash_opens(
    client: httpx.AsyncClient, redis_url: str, prefix: str, make_worker: MakeWorker
) -> None:
    async with Queue("team/emails", connection=redis_url, prefix=prefix) as queue:
        job = await queue.add("n", job_id="j1")
        overview = (await client.get("/dashboard")).text
        assert 'href="/dashboard/queues/team%2Femails"' in overview
        page = await client.get("/dashboard/queues/team%2Femails")
        assert page.status_code == 200 and "j1" in page.text
        job_page = await client.get(f"/dashboard/queues/team%2Femails/jobs/{job.id}")
        assert job_page.status_code == 200
        dead = await client.get("/dashboard/queues/team%2Femails/dead-letters")
        assert dead.status_code == 200


async def test_job_page_of_a_missing_job_is_a_404(client: httpx.AsyncClient, queue: Queue) -> None:
    await queue.add("n")
    response = await client.get("/dashboard/queues/jobs/jobs/nope")
    assert response.status_code == 404
    assert "There is no job &#39;nope&#39; in &#39;jobs&#39;" in response.text


async def test_a_job_page_says_when_the_job_expires(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    expiring = await queue.add("n", None, expires=3_600_000)
    plain = await queue.add("n", None)
    stored = await queue.get_job(expiring.id)
    assert stored is not None and stored.expires_at is not None
    moment = datetime.datetime.fromtimestamp(stored.expires_at / 1000, datetime.timezone.utc)

    page = await client.get(f"/dashboard/queues/jobs/jobs/{expiring.id}")
    other = await client.get(f"/dashboard/queues/jobs/jobs/{plain.id}")

    assert f"<dt>Expires</dt><dd>{moment:%Y-%m-%d %H:%M:%S} UTC (must start by then)" in page.text
    assert "<dt>Expires</dt>" not in other.text
