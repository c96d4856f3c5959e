"""The OpenAPI document, checked by schemathesis against a seeded app: whatever it generates,
no answer is a 5xx, and every answer conforms to the schema (status, content type, body).

schemathesis signs in as a viewer: every read runs, and every state-changing request is
refused with a 403 before it touches the seeded dead letters.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from lazarus.http import create_app

from .conftest import DLQ

VIEWER = "viewer-token-for-schemathesis"
VIEWER_AUTH = {"Authorization": f"Bearer {VIEWER}"}

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _cases() -> list[tuple[str, str, GenerationMode]]:
    """``(method, path, mode)`` of every operation in both generation modes, except the
    negative mode of operations that take no input; building the document needs no Redis."""
    document = create_app(connection="redis://unused.invalid:1/0", auth=False).openapi()
    found = []
    for path, item in document["paths"].items():
        for method, spec in item.items():
            found.append((method.upper(), path, GenerationMode.POSITIVE))
            if spec.get("parameters") or spec.get("requestBody"):
                found.append((method.upper(), path, GenerationMode.NEGATIVE))
    return found


@pytest.fixture
def api_schema(redis_url: str, prefix: str, seeded: dict[str, str]) -> schemathesis.BaseSchema:
    """The OpenAPI schema of an app with four dead letters, read from its ``/openapi.json``."""
    tokens = f"viewer:viewer+payloads:{VIEWER}"
    app = create_app(connection=redis_url, prefix=prefix, tokens=tokens, allowed_hosts=["*"])
    return schemathesis.openapi.from_asgi("/openapi.json", app, headers=VIEWER_AUTH)


def strategy(
    operation: APIOperation, mode: GenerationMode, seeded: dict[str, str]
) -> st.SearchStrategy[Case]:
    """Cases of ``operation``; positive ones also aim at the seeded dead letters at times."""
    plain = operation.as_strategy(generation_mode=mode)
    names = {p.name for p in operation.iter_parameters()}
    if mode is not GenerationMode.POSITIVE or "dlq" not in names:
        return plain
    aimed = [operation.as_strategy(generation_mode=mode, query={"dlq": DLQ})]
    if "id" in names:
        ids = {"id": seeded["a"]}
        aimed.append(
            operation.as_strategy(generation_mode=mode, query={"dlq": DLQ}, path_parameters=ids)
        )
    return st.one_of(plain, *aimed)


# schemathesis.pytest.from_fixture (the lazy loader) breaks on pytest 9 (it reads the removed
# ``Node._nodeid``), so the test is parametrized by operation and runs hypothesis itself.
@pytest.mark.parametrize(("method", "path", "mode"), _cases())
def test_every_operation_answers_without_5xx_and_as_its_schema_says(
    api_schema: schemathesis.BaseSchema,
    seeded: dict[str, str],
    method: str,
    path: str,
    mode: GenerationMode,
) -> None:
    operation = api_schema[path][method]

    @given(case=strategy(operation, mode, seeded))
    @settings(
        max_examples=10,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def answers_as_documented(case: Case) -> None:
        case.call_and_validate(checks=CHECKS, headers=VIEWER_AUTH)

    answers_as_documented()


async def test_openapi_document_lists_every_route(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    for base in ("/api/dlq",):
        assert set(paths[base]) == {"get", "delete"}
        assert set(paths[f"{base}/{{id}}"]) == {"get", "delete"}
        assert set(paths[f"{base}/{{id}}/retry"]) == {"post"}
        assert set(paths[f"{base}/retry"]) == {"post"}
        assert set(paths[f"{base}/stats"]) == {"get"}
        assert set(paths[f"{base}/count"]) == {"get"}
    assert set(paths["/api/dead-letters/bulk"]) == {"post"}
    assert set(paths["/api/dead-letters/bulk/{operation_id}"]) == {"get", "delete"}
    assert set(paths["/api/queues/{name}/jobs/{id}"]) == {"get", "patch"}
    assert set(paths["/api/queues/{name}/drain"]) == {"post"}
    for path in ("/api/queues", "/api/queues/{name}",
                 "/api/queues/{name}/pause", "/api/queues/{name}/resume", "/health",
                 "/metrics", "/api/dead-letters", "/api/dead-letters/queues",
                 "/api/dead-letters/original/{id}"):  # fmt: skip
        assert set(paths[path]) <= {"get", "post"}, path


async def test_openapi_document_describes_cursor_pagination(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    listing = document["paths"]["/api/dlq"]["get"]
    names = {p["name"] for p in listing["parameters"]}
    page = document["components"]["schemas"]["DeadLetterPage"]["properties"]
    pagination = document["components"]["schemas"]["Pagination"]["properties"]

    assert {"cursor", "limit", "order", "page", "status"} <= names
    assert {"data", "pagination", "total", "page", "limit", "totalPages"} == set(page)
    assert {"total", "has_more", "next_cursor", "limit"} == set(pagination)
