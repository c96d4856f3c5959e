"""The conformance runner's own checks: each matcher and path form rejects what it must, so a
passing suite case means something."""

from __future__ import annotations

from typing import Any

import pytest

from .dsl import MISSING, render, resolve
from .matchers import check
from .runner import body_problems, cross_step

V7 = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
BODY = {"jobs": [{"id": "a", "state": "active", "n": 3}, {"id": "b", "state": "done"}],
        "job": {"id": V7, "at": "2026-01-01T00:00:00.5Z"}}  # fmt: skip


@pytest.mark.parametrize(
    ("path", "expected"),
    [("$.jobs[0].id", "a"), ("$.jobs[*].id", ["a", "b"]), ("$.jobs[?(@.id=='b')].state", "done"),
     ("$.jobs[5]", MISSING), ("$.nope", MISSING), ("$.jobs[?(@.id=='z')]", MISSING)],
)  # fmt: skip
def test_paths_resolve(path: str, expected: Any) -> None:
    assert resolve(BODY, path) == expected


@pytest.mark.parametrize(
    ("value", "matcher"),
    [("x", "absent"), (MISSING, "exists"), (None, "any"), ("", "string:nonempty"),
     ("550e8400-e29b-41d4-a716-446655440000", "string:uuidv7"), ("2026-01-01", "string:datetime"),
     ("abc", "string:contains:z"), ("abc", "string:pattern(^b)"), (0, "number:positive"),
     (-1, "number:non_negative"), (5, "number:range(0,4)"), (3200, "~2000"), ([], "array:nonempty"),
     ([1], "array:empty"), ([1], "array:length:2"), ([1], "array:min_length:2"),
     (["a"], "contains:b"), (["a"], "not_contains:a"), (1, 2), (True, False), ("x", None),
     ([1, 2], [1]), ("b", {"$in": ["a"]}), ("b", {"$or": ["a", "number:positive"]}),
     (3, {"$exists": False}), ("3", {"$exists": True, "$type": "number"}), ("ab", {"$match": "^b"}),
     ([1], {"$size": 2}), ([1], {"$size": {"$gte": 2}}), ({"a": 1}, {"$empty": True}),
     (5, {"range": {"min": 6}}), (0, {"$gte": 1}), ("200", 200), (True, 1)],
)  # fmt: skip
def test_matchers_reject(value: Any, matcher: Any) -> None:
    assert check(value, matcher) is not None


@pytest.mark.parametrize(
    ("value", "matcher"),
    [(MISSING, "absent"), (None, "exists"), (V7, "string:uuidv7"),
     ("2026-01-01T00:00:00.5Z", "string:datetime"), (2900, "~2000"), (42, "one_of:200,42"),
     ([1, "x"], [1, "string:nonempty"]), (None, {"$empty": True}), (2, {"range": {"max": 2}})],
)  # fmt: skip
def test_matchers_accept(value: Any, matcher: Any) -> None:
    assert check(value, matcher) is None


def test_templates_resolve_earlier_steps_and_leave_others() -> None:
    steps = {"s1": {"body": BODY}}

    rendered = render({"{{steps.s1.response.body.jobs[1].id}}": ["{{steps.s1.response.body.jobs}}",
                       "{{job_id}}", "{{steps.s9.response.body.x}}"]}, steps)  # fmt: skip

    assert rendered == {"b": [
        '[{"id":"a","state":"active","n":3},{"id":"b","state":"done"}]', "{{job_id}}",
        "{{steps.s9.response.body.x}}",
    ]}  # fmt: skip


def test_top_level_or_needs_one_alternative() -> None:
    assert body_problems(BODY, {"$or": [{"$.jobs": "array:empty"}, {"$.job.id": "x"}]})
    assert not body_problems(BODY, {"$or": [{"$.jobs": "array:empty"}, {"$.jobs[0].id": "a"}]})


def test_exclusive_claim_counts_fetches() -> None:
    rule = {"job_id": "a", "exactly_one_has_job": True, "exactly_one_empty": True}
    both = {"exclusive_claim": {**rule, "fetches": ['[{"id":"a"}]', '[{"id":"a"}]']}}
    one = {"exclusive_claim": {**rule, "fetches": ['[{"id":"a"}]', "[]"]}}

    assert cross_step(both, {})
    assert not cross_step(one, {})
