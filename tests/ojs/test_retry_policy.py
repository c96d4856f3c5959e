"""OJS's retry policy: the delays of each strategy, the cap, jitter's range, non-retryable
error types, and the validation of a policy."""

from __future__ import annotations

import re

import pytest

from lazarus.ojs.envelope import UUIDV7_RE, new_id
from lazarus.ojs.errors import OjsError
from lazarus.ojs.retry import Decision, decide, duration_ms, parse_policy


def delays(policy: dict[str, object], retries: int = 4) -> list[int]:
    parsed = parse_policy({"jitter": False, **policy})
    return [parsed.delay_ms(n) for n in range(1, retries + 1)]


def test_each_strategy_spaces_retries_as_the_spec_says() -> None:
    assert delays({"initial_interval": "PT1S", "backoff_coefficient": 2.0}) == [
        1000,
        2000,
        4000,
        8000,
    ]
    assert delays({"initial_interval": "PT1S", "backoff_strategy": "linear"}) == [
        1000,
        2000,
        3000,
        4000,
    ]
    assert delays({"initial_interval": "PT2S", "backoff_strategy": "constant"}) == [2000] * 4
    assert delays({"backoff_coefficient": 10.0, "max_interval": "PT2S"}) == [1000, 2000, 2000, 2000]


def test_jitter_stays_within_half_to_one_and_a_half_and_under_the_cap() -> None:
    policy = parse_policy({"initial_interval": "PT2S", "backoff_coefficient": 1.0})
    samples = [policy.delay_ms(1) for _ in range(500)]
    assert all(1000 <= d < 3000 for d in samples)
    assert len(set(samples)) > 1
    capped = parse_policy({"initial_interval": "PT2S", "max_interval": "PT2S"})
    assert all(capped.delay_ms(1) <= 2000 for _ in range(200))


def test_non_retryable_types_match_exactly_or_by_prefix() -> None:
    policy = parse_policy({"non_retryable_errors": ["FatalError", "auth.*"], "max_attempts": 5})
    assert decide(policy, 1, "FatalError", True) == Decision("discard")
    assert decide(policy, 1, "auth.token_expired", True) == Decision("discard")
    assert decide(policy, 1, "external.auth.failure", True).kind == "retry"
    assert decide(policy, 1, "FatalErrorish", True).kind == "retry"


def test_the_last_attempt_or_a_non_retryable_error_ends_per_on_exhaustion() -> None:
    policy = parse_policy({"max_attempts": 2, "on_exhaustion": "dead_letter"})
    assert decide(policy, 1, "handler_error", True).kind == "retry"
    assert decide(policy, 2, "handler_error", True) == Decision("dead_letter")
    assert decide(policy, 1, "handler_error", False) == Decision("dead_letter")


@pytest.mark.parametrize(
    ("policy", "field"),
    [({"max_attempts": -1}, "max_attempts"), ({"backoff_coefficient": 0.5}, "backoff_coefficient"),
     ({"initial_interval": "1s"}, "initial_interval"), ({"on_exhaustion": "keep"}, "on_exhaustion"),
     ({"jitter": "yes"}, "jitter"), ({"non_retryable_errors": "x"}, "non_retryable_errors"),
     ({"backoff_strategy": "random"}, "backoff_strategy"),
     ({"max_attempts": 1001}, "max_attempts"),
     ({"backoff_coefficient": float("nan")}, "backoff_coefficient"),
     ({"backoff_coefficient": float("inf")}, "backoff_coefficient"),
     ({"backoff_coefficient": 10**400}, "backoff_coefficient"),
     ({"backoff_coefficient": 100.5}, "backoff_coefficient"),
     ({"initial_interval": "P99999999999999999999D"}, "initial_interval"),
     ({"initial_interval": "P" + "9" * 400 + "D"}, "initial_interval"),
     ({"max_interval": "P7DT0.001S"}, "max_interval")],
)  # fmt: skip
def test_a_bad_policy_is_unprocessable_and_names_its_field(
    policy: dict[str, object], field: str
) -> None:
    with pytest.raises(OjsError) as raised:
        parse_policy(policy)
    assert raised.value.status == 422
    assert field in raised.value.message


def test_the_longest_policy_allowed_waits_out_its_cap_without_overflowing() -> None:
    policy = parse_policy({"max_attempts": 1000, "backoff_coefficient": 100, "jitter": False,
                           "max_interval": "P7D"})  # fmt: skip

    assert policy.delay_ms(999) == 7 * 86_400_000  # 100.0 ** 998 is past a float's range
    assert decide(policy, 999, "handler_error", True) == Decision("retry", 7 * 86_400_000)


def test_durations_parse() -> None:
    assert [duration_ms(d, "d") for d in ("PT1S", "PT0.5S", "PT5M", "P1DT1H")] == [
        1000, 500, 300_000, 90_000_000]  # fmt: skip


def test_new_ids_are_uuidv7_in_time_order() -> None:
    ids = [new_id() for _ in range(50)]
    assert all(UUIDV7_RE.match(i) for i in ids)
    assert [i[:13] for i in ids] == sorted(i[:13] for i in ids)  # the millisecond prefix
    assert len(set(ids)) == 50
    assert re.match(r"^[0-9a-f]{8}-", ids[0])
