"""Redrive rules, circuit breakers, rules files and alert rules, without Redis."""

from __future__ import annotations

import pytest

from lazarus import DeadLetterFilter
from lazarus.redrive import AlertRule, RedriveRule, parse_rules, prometheus_rules
from lazarus.redrive.outcomes import CircuitBreaker
from lazarus.redrive.rules import Candidate, first_match


def candidate(**fields: object) -> Candidate:
    base: dict[str, object] = dict(
        id="d1", source_queue="payments", name="charge", error_type="TimeoutError",
        reason="attempts_exhausted", failed_reason="gateway timed out", dead_lettered_at=1_000,
        status_at=None, replay_count=0,
    )  # fmt: skip
    base.update(fields)
    return Candidate(**base)  # type: ignore[arg-type]


def test_backoff_follows_the_schedule_by_replay_count_and_repeats_its_last_step() -> None:
    rule = RedriveRule()  # 1, 5, 15, 30, 60 minutes
    assert rule.decide(candidate(), 1_000 + 59_999) == "wait"
    assert rule.decide(candidate(), 1_000 + 60_000) == "replay"
    assert rule.due_at(candidate(replay_count=2)) == 1_000 + 900_000
    assert rule.due_at(candidate(replay_count=4, status_at=5_000)) == 5_000 + 3_600_000
    assert RedriveRule(schedule=[10, 20], max_replays=9).due_at(candidate(replay_count=7)) == 1_020


def test_max_replays_fails_whatever_the_strategy() -> None:
    for strategy in ("backoff", "window", "manual"):
        rule = RedriveRule(strategy=strategy, max_replays=2)  # type: ignore[arg-type]
        assert rule.decide(candidate(replay_count=2), 10**13) == "failed"
    assert RedriveRule(strategy="manual").decide(candidate(), 0) == "manual"


def test_matching_uses_every_filter_field_and_the_first_match_wins() -> None:
    timeouts = RedriveRule(DeadLetterFilter(error_type="TimeoutError", source_queue="payments"))
    by_prefix = RedriveRule(DeadLetterFilter(name_prefix="char", failed_reason="GATEWAY"))
    by_pattern = RedriveRule(failed_reason_pattern=r"timed\s+out$")

    assert timeouts.matches(candidate()) and by_prefix.matches(candidate())
    assert by_pattern.matches(candidate())
    assert not timeouts.matches(candidate(source_queue="emails"))
    assert not by_prefix.matches(candidate(name="refund"))
    assert not RedriveRule(DeadLetterFilter(reason="stalled")).matches(candidate())
    assert first_match([by_prefix, timeouts], candidate()) is by_prefix
    assert first_match([timeouts], candidate(error_type="KeyError")).strategy == "manual"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"strategy": "sometimes"}, "strategy"),
        ({"schedule": []}, "schedule"),
        ({"schedule": [1.5]}, "schedule"),
        ({"max_replays": -1}, "max_replays"),
        ({"hours": [24]}, "hours"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"strategy": "conditional"}, "gate"),
        ({"strategy": "conditional", "health_url": "ftp://x"}, "health_url"),
        ({"failed_reason_pattern": "("}, "failed_reason_pattern"),
        ({"match": DeadLetterFilter(payload_contains="x")}, "match"),
        ({"name": "retry timeouts"}, "^name 'retry timeouts' has ' '"),
        ({"name": ""}, "^name must not be empty"),
    ],
)
def test_bad_rules_raise_naming_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        RedriveRule(**fields)  # type: ignore[arg-type]


def test_a_breaker_opens_after_consecutive_failures_and_a_trial_success_closes_it() -> None:
    breaker = CircuitBreaker(threshold=2, cooldown=1_000)
    breaker.record(False, 0)
    breaker.record(True, 1)
    breaker.record(False, 2)
    assert breaker.allows(3)
    breaker.record(False, 10)

    assert breaker.is_open and not breaker.allows(500)
    assert breaker.allows(1_010)  # half-open: one trial
    assert not breaker.allows(1_011)
    breaker.record(False, 1_020)  # the trial failed: open again
    assert not breaker.allows(1_500)
    assert breaker.allows(2_020)
    breaker.record(True, 2_030)
    assert not breaker.is_open and breaker.allows(2_031)


def test_a_rules_file_gives_rules_and_alerts() -> None:
    rules, alerts = parse_rules(
        """
        [[rule]]
        name = "timeouts"
        schedule = ["PT1M", 300000]
        max_replays = 3
        match = { error_type = "TimeoutError", name_prefix = "charge" }

        [[rule]]
        strategy = "window"
        hours = [1, 2]
        timezone = "Europe/Paris"

        [[alert]]
        name = "Big"
        metric = "backlog"
        op = ">"
        threshold = 5
        """
    )

    assert rules[0].schedule == (60_000, 300_000) and rules[0].max_replays == 3
    assert rules[0].match == DeadLetterFilter(error_type="TimeoutError", name_prefix="charge")
    assert rules[1].hours == (1, 2)
    assert alerts == [AlertRule("Big", "backlog", ">", 5)]
    assert parse_rules("")[1] is None


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[[rule]]\nstrategy = 'often'\n", "rule[0]: strategy"),
        ("[[rule]]\nspeed = 1\n", "rule[0] has unknown fields: speed"),
        ("[[rule]]\nmatch = { colour = 'red' }\n", "rule[0]"),
        ("[[rule]]\nschedule = ['soon']\n", "rule[0]: schedule"),
        ("[[rule]]\nname = 'retry timeouts'\n", "rule[0]: name"),
        ("[rules]\n", "unknown tables"),
        ("[[rule]\n", "not valid TOML"),
        ("[[alert]]\nname = 'x'\nmetric = 'mood'\nop = '>'\nthreshold = 1\n", "alert[0]"),
    ],
)
def test_bad_rules_files_name_what_is_wrong(text: str, named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        parse_rules(text)


def test_prometheus_rules_carry_seed_defaults() -> None:
    text = prometheus_rules()

    assert "- alert: HighDLQIngestionRate" in text
    assert "expr: lazarus_dlq_ingestion_per_minute > 100" in text
    assert "expr: lazarus_dlq_backlog > 10000" in text
    assert "severity: critical" in text
    assert "expr: lazarus_dlq_resolution_rate < 0.5" in text


def test_bad_alert_rules_raise_naming_the_field() -> None:
    with pytest.raises(ValueError, match="op"):
        AlertRule("X", "backlog", ">=", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="threshold"):
        AlertRule("X", "backlog", ">", float("nan"))
    with pytest.raises(ValueError, match="name"):
        AlertRule("two words", "backlog", ">", 1)


async def test_a_health_url_gate_holds_only_while_the_url_answers_2xx() -> None:
    import http.server
    import threading

    from lazarus.redrive.outcomes import gate_open

    status = [200]

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status[0])
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/health"
        rule = RedriveRule(strategy="conditional", health_url=url)
        assert await gate_open(rule)
        status[0] = 503
        assert not await gate_open(rule)
    finally:
        server.shutdown()
        server.server_close()
    assert not await gate_open(rule)  # nobody answers: closed


async def test_a_gate_that_raises_is_closed() -> None:
    from lazarus.redrive.outcomes import gate_open

    def broken() -> bool:
        raise RuntimeError("probe failed")

    assert not await gate_open(RedriveRule(strategy="conditional", gate=broken))
    assert await gate_open(RedriveRule(strategy="conditional", gate=lambda: True))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"poll_interval": 0}, "poll_interval"),
        ({"batch_size": 0}, "batch_size"),
        ({"claim_ms": 10}, "claim_ms"),
        ({"settle_interval": -1}, "settle_interval"),
        ({"prune_interval": float("nan")}, "prune_interval"),
        ({"alert_interval": True}, "alert_interval"),
        ({"alert_rules": ["backlog > 5"]}, "alert_rules"),
        ({"rules": [{"strategy": "manual"}]}, r"rules\[0\]"),
        ({"dlq_name": "a b"}, "queue name"),
    ],
)
def test_bad_redriver_options_raise_naming_the_field(
    options: dict[str, object], named: str
) -> None:
    from lazarus import Redriver

    args: dict[str, object] = {"dlq_name": "jobs-dlq", "rules": [], **options}
    with pytest.raises((ValueError, TypeError), match=named):
        Redriver(connection="redis://unused.invalid:1/0", **args)  # type: ignore[arg-type]
