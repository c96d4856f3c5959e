"""Webhooks delivered from the outbox to a real HTTP receiver on 127.0.0.1: signed the
Standard Webhooks way, retried with backoff, logged per attempt, never redirected."""

from __future__ import annotations

import base64
import datetime
import json
import random
from collections.abc import Callable, Iterator

import pytest
import redis.asyncio as aioredis
from standardwebhooks.webhooks import Webhook

from lazarus import Queue, Worker
from lazarus._keys import QueueKeys
from lazarus.webhooks import WebhookDeliverer, WebhookEndpoint, backoff, deliveries, send_test
from lazarus.webhooks.deliverer import RETRY_FOR

from ..conftest import wait_until
from .helpers import dead_letter
from .receiver import Receiver

MakeWorker = Callable[..., Worker]
SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.stop()


def make_deliverer(
    raw: aioredis.Redis, prefix: str, *endpoints: WebhookEndpoint, **options: object
) -> WebhookDeliverer:
    options.setdefault("first_delay", 0.01)
    options.setdefault("max_delay", 0.05)
    return WebhookDeliverer(raw, list(endpoints), prefix=prefix, **options)  # type: ignore[arg-type]


@pytest.fixture
async def registered(raw: aioredis.Redis, prefix: str, dlq: Queue) -> None:
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)


async def drain(deliverer: WebhookDeliverer, until: Callable[[], bool]) -> None:
    async def done() -> bool:
        await deliverer.step()
        return until()

    await wait_until(done, message="webhook deliveries")


@pytest.mark.usefixtures("registered")
async def test_a_dead_letter_is_delivered_signed_so_a_standard_verifier_accepts_it(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    receiver: Receiver,
) -> None:  # fmt: skip
    # Given an endpoint configured before the job dies
    deliverer = make_deliverer(
        raw, prefix, WebhookEndpoint("ops", receiver.url, SECRET), link_base="https://ops.example"
    )
    await deliverer.step()
    [letter] = await dead_letter(make_worker, queue, dlq, [("email.send", {"to": "a"})])

    # When the deliverer runs
    await drain(deliverer, lambda: len(receiver.requests) == 1)
    await deliverer.close()

    # Then the receiver got one request that Standard Webhooks' own verifier accepts
    _, headers, body = receiver.requests[0]
    document = Webhook(SECRET).verify(body, headers)
    assert document["type"] == "dead_letter.dead-lettered"
    assert document["data"]["id"] == letter.id
    assert document["data"]["jobName"] == "email.send"
    assert document["data"]["errorType"] == "UnrecoverableError"
    assert document["data"]["link"] == f"https://ops.example/api/v1/dead-letter/{letter.id}"
    assert headers["webhook-id"].startswith("msg_")
    [logged] = await deliveries(raw, prefix, [dlq.name])
    assert (logged["outcome"], logged["status"], logged["attempt"]) == ("delivered", 204, 1)


@pytest.mark.usefixtures("registered")
async def test_a_refused_delivery_is_retried_with_the_same_id_until_it_succeeds(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    receiver: Receiver,
) -> None:  # fmt: skip
    # Given a receiver that answers 500
    deliverer = make_deliverer(raw, prefix, WebhookEndpoint("ops", receiver.url, SECRET))
    await deliverer.step()
    receiver.status = 500
    await dead_letter(make_worker, queue, dlq, [("a", 1)])
    await drain(deliverer, lambda: len(receiver.requests) >= 2)

    # When it recovers
    receiver.status = 200
    count = len(receiver.requests)
    await drain(deliverer, lambda: len(receiver.requests) > count)
    for _ in range(3):
        await deliverer.step()
    await deliverer.close()

    # Then every attempt carried the same id, the last succeeded, and nothing is left to send
    assert len({h["webhook-id"] for _, h, _ in receiver.requests}) == 1
    assert len(receiver.requests) == count + 1
    log = await deliveries(raw, prefix, [dlq.name])
    assert log[0]["outcome"] == "delivered"
    assert {e["outcome"] for e in log[1:]} == {"failed"}
    assert {e["status"] for e in log[1:]} == {500}
    assert await raw.xlen(QueueKeys(prefix, dlq.name).dl_outbox) == 0


@pytest.mark.usefixtures("registered")
async def test_a_redirect_is_not_followed_and_counts_as_a_failure(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    receiver: Receiver,
) -> None:  # fmt: skip
    receiver.status = 307
    receiver.location = receiver.url.replace("/hook", "/elsewhere")
    deliverer = make_deliverer(raw, prefix, WebhookEndpoint("ops", receiver.url, SECRET))
    await deliverer.step()
    await dead_letter(make_worker, queue, dlq, [("a", 1)])

    await drain(deliverer, lambda: len(receiver.requests) >= 1)
    await deliverer.close()

    assert receiver.bodies("/elsewhere") == []
    log = await deliveries(raw, prefix, [dlq.name])
    assert (log[-1]["outcome"], log[-1]["status"]) == ("failed", 307)


@pytest.mark.usefixtures("registered")
async def test_only_the_chosen_events_are_sent_and_each_endpoint_gets_its_own(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    receiver: Receiver,
) -> None:  # fmt: skip
    # Given one endpoint for arrivals only and one for purges only
    arrivals = WebhookEndpoint("arrivals", receiver.url, SECRET)
    purges = WebhookEndpoint("purges", receiver.url + "?p", SECRET, frozenset({"purged"}))
    deliverer = make_deliverer(raw, prefix, arrivals, purges)
    await deliverer.step()

    # When a dead letter arrives and is purged
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])
    await dlq.purge_dead_letter(letter.id)
    await drain(deliverer, lambda: len(receiver.requests) == 2)
    for _ in range(2):
        await deliverer.step()
    await deliverer.close()

    # Then each got exactly its event
    by_path = {p: json.loads(b)["type"] for p, _, b in receiver.requests}
    assert by_path == {"/hook": "dead_letter.dead-lettered", "/hook?p": "dead_letter.purged"}


def test_backoff_doubles_from_five_seconds_to_a_cap_of_an_hour_with_jitter() -> None:
    rng = random.Random(7)
    delays = [backoff(n, rng=rng) for n in range(1, 16)]
    assert 2.5 <= delays[0] <= 5
    assert 5 <= delays[1] <= 10
    assert all(1800 <= d <= 3600 for d in delays[10:])
    # Sixty attempts span more than a day: retries run for the whole of RETRY_FOR.
    assert sum(backoff(n, rng=rng) for n in range(1, 61)) > 86_400
    assert datetime.timedelta(hours=24) <= RETRY_FOR


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("abc", "whsec_"),
        ("whsec_!!!", "base64"),
        ("whsec_" + base64.b64encode(b"x").decode(), "16"),
    ],
)
def test_a_bad_secret_raises_value_error_naming_the_secret(secret: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"secret.*{message}"):
        WebhookEndpoint("ops", "https://example.com/in", secret)


def test_a_url_that_is_not_http_raises_value_error_naming_the_url() -> None:
    with pytest.raises(ValueError, match="webhook url"):
        WebhookEndpoint("ops", "file:///etc/passwd", SECRET)


@pytest.mark.parametrize("port", ["99999", "0", "http"])
def test_a_url_whose_port_is_no_tcp_port_raises_value_error_naming_the_url(port: str) -> None:
    with pytest.raises(ValueError, match=r"^webhook url .* has a port that is not a number"):
        WebhookEndpoint("ops", f"https://hooks.example.com:{port}/in", SECRET)


def test_events_given_as_one_str_raise_type_error_naming_events() -> None:
    # (a str is iterable: "purged" was read as the events 'd', 'e', 'g', ...)
    with pytest.raises(TypeError, match=r"^webhook events must be a collection of event names"):
        WebhookEndpoint("ops", "https://hooks.example.com/in", SECRET, "purged")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^webhooks\[2\]: webhook events must be a collection"):
        WebhookEndpoint.from_mapping(
            {"url": "https://x.example/in", "secret": SECRET, "events": "purged"}, index=2
        )


async def test_send_test_reaches_the_receiver_signed(receiver: Receiver) -> None:
    status, line = await send_test(WebhookEndpoint("test", receiver.url, SECRET))

    assert status == 204 and "delivered" in line
    _, headers, body = receiver.requests[0]
    assert Webhook(SECRET).verify(body, headers)["type"] == "webhook.test"


@pytest.mark.usefixtures("registered")
async def test_an_event_refused_for_longer_than_the_retry_window_is_abandoned_and_logged(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    receiver: Receiver,
) -> None:  # fmt: skip
    # Given a receiver that keeps answering 503 and a retry window of a moment
    receiver.status = 503
    deliverer = make_deliverer(
        raw, prefix, WebhookEndpoint("ops", receiver.url, SECRET),
        retry_for=datetime.timedelta(milliseconds=200),
    )  # fmt: skip
    await deliverer.step()
    await dead_letter(make_worker, queue, dlq, [("a", 1)])

    # When the deliverer keeps trying
    async def abandoned() -> bool:
        await deliverer.step()
        log = await deliveries(raw, prefix, [dlq.name])
        return bool(log) and log[0]["outcome"] == "abandoned"

    await wait_until(abandoned, message="the event given up")
    await deliverer.close()

    # Then it tried more than once, gave up, and holds nothing back any more
    log = await deliveries(raw, prefix, [dlq.name])
    assert len(log) >= 2 and {e["outcome"] for e in log[1:]} == {"failed"}
    assert await raw.xlen(QueueKeys(prefix, dlq.name).dl_outbox) == 0
    assert await raw.exists(QueueKeys(prefix, dlq.name).dl_webhook_schedule("ops")) == 0


@pytest.mark.usefixtures("registered")
async def test_an_arrival_delivered_after_the_dead_letter_left_still_names_what_died(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    receiver: Receiver,
) -> None:  # fmt: skip
    # Given an arrival not delivered yet, and the dead letter purged meanwhile
    deliverer = make_deliverer(raw, prefix, WebhookEndpoint("ops", receiver.url, SECRET))
    await deliverer.step()
    [letter] = await dead_letter(make_worker, queue, dlq, [("email.send", 1)])
    await dlq.purge_dead_letter(letter.id)

    # When it is delivered
    await drain(deliverer, lambda: len(receiver.requests) == 1)
    await deliverer.close()

    # Then its summary still says what died, from where, and why
    data = json.loads(receiver.requests[0][2])["data"]
    assert (data["id"], data["jobName"], data["sourceQueue"]) == (letter.id, "email.send", "jobs")
    assert (data["errorType"], data["reason"]) == ("UnrecoverableError", "unrecoverable")


def test_endpoints_from_configuration_name_the_entry_and_field_at_fault(
    raw: aioredis.Redis,
) -> None:
    ok = WebhookEndpoint.from_mapping({"name": "a", "url": "https://x.example/in",
                                       "secret": SECRET, "events": ["purged"]})  # fmt: skip
    assert ok.events == frozenset({"purged"}) and ok.group == "webhook:a"
    with pytest.raises(ValueError, match=r"webhooks\[3\]: webhook events"):
        WebhookEndpoint.from_mapping(
            {"url": "https://x.example/in", "secret": SECRET, "events": ["exploded"]}, index=3
        )
    with pytest.raises(ValueError, match=r"webhooks\[0\] has unknown fields \['retries'\]"):
        WebhookEndpoint.from_mapping({"url": "https://x.example/in", "retries": 3})
    with pytest.raises(ValueError, match="distinct"):
        WebhookDeliverer(raw, [ok, ok])
