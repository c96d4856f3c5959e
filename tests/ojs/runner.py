"""Run one OJS conformance test case (a JSON file of the suites) against a server."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from .dsl import MISSING, render, resolve
from .matchers import approx_tolerance, check

TOLERANCE_PCT = 50.0


class StepFailed(AssertionError):
    """A step's assertion did not hold."""


def steps_of(section: Any) -> list[dict[str, Any]]:
    """The steps of ``setup``/``steps``/``teardown`` (a list, or an object with ``steps``)."""
    if section is None:
        return []
    if isinstance(section, dict):
        return list(section.get("steps", []))
    return list(section)


async def run_case(client: httpx.AsyncClient, case: dict[str, Any]) -> None:
    """Run setup, steps and teardown; raise :class:`StepFailed` at the first failure."""
    results: dict[str, Any] = {}
    try:
        for step in steps_of(case.get("setup")) + steps_of(case["steps"]):
            await run_step(client, step, results)
    finally:
        for step in steps_of(case.get("teardown")):
            await run_step(client, step, results)


async def run_step(
    client: httpx.AsyncClient, step: dict[str, Any], results: dict[str, Any]
) -> None:
    """One step: wait, assert across steps, or send the request and check the response."""
    action = step["action"]
    if action == "WAIT":
        await asyncio.sleep((step.get("duration_ms") or step.get("delay_ms") or 0) / 1000)
        return
    if step.get("delay_ms"):
        await asyncio.sleep(step["delay_ms"] / 1000)  # the suite's own timing
    if action == "ASSERT":
        problems = cross_step(render(step.get("assertions", {}), results), results)
    else:
        response = await send(client, step, results)
        results[step["id"]] = response
        problems = check_response(response, render(step.get("assertions") or {}, results))
    if problems:
        raise StepFailed(f"step {step['id']!r} ({action} {step.get('path', '')}): "
                         + "; ".join(problems))  # fmt: skip


async def send(
    client: httpx.AsyncClient, step: dict[str, Any], results: dict[str, Any]
) -> dict[str, Any]:
    """Send the step's request; the response as the templates and checks see it."""
    headers = dict(render(step.get("headers") or {}, results))
    content = None
    if "body" in step:
        content = json.dumps(render(step["body"], results)).encode()
        headers.setdefault("Content-Type", "application/json")
    started = time.monotonic()
    response = await client.request(step["action"], render(step["path"], results),
                                    headers=headers, content=content)  # fmt: skip
    elapsed = (time.monotonic() - started) * 1000
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    return {"status": response.status_code, "headers": response.headers, "body": body,
            "text": response.text, "elapsed_ms": elapsed}  # fmt: skip


def check_response(response: dict[str, Any], assertions: dict[str, Any]) -> list[str]:
    """Every failed assertion of a response, as messages."""
    problems: list[str] = []
    for key, expected in assertions.items():
        checker = _RESPONSE_CHECKS.get(key)
        if checker is None:
            problems.append(f"unknown assertion {key!r}")
            continue
        problems += [f"{key}: {p}" for p in checker(response, expected)]
    return problems


def _status(response: dict[str, Any], expected: Any) -> list[str]:
    problem = check(response["status"], expected, TOLERANCE_PCT)
    return [f"{problem} (body: {response['text'][:300]})"] if problem else []


def _status_in(response: dict[str, Any], expected: list[int]) -> list[str]:
    return [] if response["status"] in expected else [f"{response['status']} not in {expected}"]


def body_problems(body: Any, expected: dict[str, Any]) -> list[str]:
    """The body assertions ``expected`` (with a top-level ``$or``) that ``body`` fails."""
    problems = []
    for path, matcher in expected.items():
        if path == "$or":
            alternatives = [body_problems(body, alt) for alt in matcher]
            if all(alternatives):
                problems.append(f"$or: no alternative holds: {alternatives}")
            continue
        problem = check(resolve(body, path), matcher, TOLERANCE_PCT)
        if problem:
            problems.append(f"{path}: {problem}")
    return problems


def _body(response: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    return body_problems(response["body"], expected)


def _body_absent(response: dict[str, Any], paths: list[str]) -> list[str]:
    return [f"{p} is present" for p in paths if resolve(response["body"], p) not in (MISSING, None)]


def _body_contains(response: dict[str, Any], parts: list[str]) -> list[str]:
    return [f"{p!r} not in the body" for p in parts if p not in response["text"]]


def _headers(response: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    problems = []
    for name, matcher in expected.items():
        value = response["headers"].get(name, MISSING)
        problem = check(value, matcher, TOLERANCE_PCT)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


def _timing(response: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    ms, problems = response["elapsed_ms"], []
    if "less_than" in expected and ms >= expected["less_than"]:
        problems.append(f"took {ms:.0f} ms, not < {expected['less_than']}")
    if "greater_than" in expected and ms <= expected["greater_than"]:
        problems.append(f"took {ms:.0f} ms, not > {expected['greater_than']}")
    if "approximate" in expected:
        target = expected["approximate"]
        if abs(ms - target) > approx_tolerance(target, TOLERANCE_PCT):
            problems.append(f"took {ms:.0f} ms, not ~{target}")
    return problems


def _ignored(_response: dict[str, Any], _expected: Any) -> list[str]:
    return []  # body_raw: reserved by the format, not yet defined


_RESPONSE_CHECKS = {
    "status": _status, "status_in": _status_in, "body": _body, "body_absent": _body_absent,
    "body_contains": _body_contains, "headers": _headers, "timing_ms": _timing,
    "body_raw": _ignored,
}  # fmt: skip


def cross_step(assertions: dict[str, Any], results: dict[str, Any]) -> list[str]:
    """An ASSERT step's checks across earlier responses."""
    problems: list[str] = []
    for key, spec in assertions.items():
        if key == "exclusive_claim":
            problems += _exclusive_claim(spec)
        elif key == "equality":
            context = {"steps": {k: {"response": {"body": v["body"]}} for k, v in results.items()}}
            for path, expected in spec.items():
                actual = resolve(context, path)
                if isinstance(expected, str) and not isinstance(actual, str):
                    expected = json.loads(expected)
                if actual != expected:
                    problems.append(f"equality: {path} differs")
        else:
            problems.append(f"unknown cross-step assertion {key!r}")
    return problems


def _exclusive_claim(spec: dict[str, Any]) -> list[str]:
    fetches = [json.loads(f) if isinstance(f, str) else f for f in spec["fetches"]]
    having = sum(1 for jobs in fetches if any(j.get("id") == spec["job_id"] for j in jobs))
    empty = sum(1 for jobs in fetches if not jobs)
    problems = []
    if spec.get("exactly_one_has_job") and having != 1:
        problems.append(f"exclusive_claim: {having} fetches got the job, not exactly one")
    if spec.get("exactly_one_empty") and empty != 1:
        problems.append(f"exclusive_claim: {empty} fetches were empty, not exactly one")
    return problems
