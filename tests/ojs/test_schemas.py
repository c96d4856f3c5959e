"""The OJS schema registry: schemas registered, read, listed a page at a time and removed
under ``/ojs/v1/schemas``, refused unless valid draft 2020-12 within the bounds, and PUSH
(single and batch) refusing ``args`` that do not conform before anything is written."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI

from lazarus import Queue
from lazarus.http import create_app
from lazarus.ojs import schemas
from lazarus.ojs.schemas import MAX_SCHEMA_BYTES

from .test_layer import backend_of

URI = "urn:ojs:schema:email.send:v1"
EMAIL_SEND = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "prefixItems": [
        {"type": "string", "format": "email"},
        {"type": "string", "enum": ["welcome", "password_reset", "invoice"]},
        {"type": "object", "properties": {"locale": {"type": "string"}}},
    ],
    "minItems": 2,
    "maxItems": 3,
}


def path_of(uri: str) -> str:
    return "/ojs/v1/schemas/" + quote(uri, safe="")


async def register(
    client: httpx.AsyncClient, schema: Any = None, uri: str = URI, **fields: Any
) -> httpx.Response:
    body = {"uri": uri, "type": "email.send", "version": 1,
            "schema": EMAIL_SEND if schema is None else schema, **fields}  # fmt: skip
    return await client.post("/ojs/v1/schemas", json=body)


async def push(client: httpx.AsyncClient, args: list[Any], schema: Any = URI) -> httpx.Response:
    body = {"type": "email.send", "args": args, "schema": schema, "options": {"queue": "mail"}}
    return await client.post("/ojs/v1/jobs", json=body)


async def written(raw: Any, prefix: str) -> dict[str, bytes]:
    """Every key of the test's prefix with its serialized value, but the API's audit trail
    (which records refused requests too)."""
    return {
        key: await raw.dump(key) async for key in raw.scan_iter(match=f"{prefix}:*")
        if key != f"{prefix}:audit"
    }  # fmt: skip


async def jobs_in_mail(redis_url: str, prefix: str) -> int:
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        counts = await mail.get_job_counts()
    return sum(counts.values())


async def test_a_registered_schema_is_read_back_listed_and_kept_in_redis(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    # When a schema is registered
    response = await register(client)

    # Then it is answered without the schema, read back with it, listed, and kept in Redis
    assert response.status_code == 201, response.text
    shown = response.json()["schema"]
    assert {k: shown[k] for k in ("uri", "type", "version")} == {
        "uri": URI, "type": "email.send", "version": 1}  # fmt: skip
    assert shown["created_at"].endswith("Z")
    got = await client.get(path_of(URI))
    assert got.status_code == 200
    assert got.json()["schema"]["schema"] == EMAIL_SEND
    listed = (await client.get("/ojs/v1/schemas")).json()
    assert [s["uri"] for s in listed["schemas"]] == [URI]
    assert "schema" not in listed["schemas"][0]
    assert listed["pagination"] == {"total": 1, "limit": 50, "offset": 0, "has_more": False}
    stored = await raw.hget(f"{prefix}:ojs:{{schemas}}:docs", URI)
    assert json.loads(stored) == EMAIL_SEND


async def test_a_uri_with_slashes_is_found_url_encoded(client: httpx.AsyncClient) -> None:
    uri = "https://schemas.example.com/email/send.json?v=1"
    assert (await register(client, uri=uri)).status_code == 201

    got = await client.get(path_of(uri))

    assert got.status_code == 200, got.text
    assert got.json()["schema"]["uri"] == uri


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "nope"}, "'nope' is not valid"),
        ({"minItems": -1}, "-1 is less than the minimum of 0"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "must reference draft 2020-12"),
        ({"items": {"$ref": "#/$defs/missing"}}, "does not resolve within the schema"),
        ({"items": {"$ref": "https://schemas.example.com/remote.json"}}, "does not resolve"),
    ],
)
async def test_a_schema_that_is_not_valid_draft_2020_12_is_refused_and_nothing_written(
    client: httpx.AsyncClient, raw: Any, prefix: str, schema: Any, reason: str
) -> None:
    before = await written(raw, prefix)

    response = await register(client, schema)

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["field"] == "schema"
    assert reason in error["details"]["schema_error"]
    assert await written(raw, prefix) == before
    assert (await client.get(path_of(URI))).status_code == 404


async def test_refs_within_the_schema_and_to_the_metaschema_resolve(
    client: httpx.AsyncClient,
) -> None:
    schema = {
        "$defs": {"address": {"type": "string", "format": "email"}},
        "prefixItems": [{"$ref": "#/$defs/address"},
                        {"$ref": "https://json-schema.org/draft/2020-12/schema"}],
    }  # fmt: skip
    assert (await register(client, schema)).status_code == 201

    assert (await push(client, ["ada@example.com", {"type": "string"}])).status_code == 201
    refused = await push(client, ["ada@example.com", {"type": 3}])
    assert refused.status_code == 400
    assert refused.json()["error"]["details"]["field"] == "args[1].type"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"uri": None}, "uri"),
        ({"uri": "no scheme"}, "uri"),
        ({"uri": "urn:" + "x" * 1024}, "uri"),
        ({"type": "Email Send"}, "type"),
        ({"version": "1"}, "version"),
        ({"version": 0}, "version"),
        ({"schema": [1]}, "schema"),
    ],
)
async def test_a_bad_registration_field_is_refused_naming_it(
    client: httpx.AsyncClient, raw: Any, prefix: str, fields: dict[str, Any], field: str
) -> None:
    before = await written(raw, prefix)
    body = {"uri": URI, "type": "email.send", "version": 1, "schema": EMAIL_SEND, **fields}

    response = await client.post("/ojs/v1/schemas", json=body)

    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"]["field"] == field
    assert await written(raw, prefix) == before


async def test_a_registration_missing_a_field_is_refused_naming_it(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/ojs/v1/schemas", json={"uri": URI, "type": "email.send",
                                                          "version": 1})  # fmt: skip

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "schema"


async def test_a_schema_over_64_kib_is_refused_naming_the_limit(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    before = await written(raw, prefix)
    big = {"type": "array", "description": "x" * MAX_SCHEMA_BYTES}

    response = await register(client, big)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["details"]["field"] == "schema"
    assert "65536 (64 KiB)" in error["message"]
    assert await written(raw, prefix) == before
    just_fits = {"description": "x" * (MAX_SCHEMA_BYTES - len('{"description":""}'))}
    assert (await register(client, just_fits)).status_code == 201


async def test_a_schema_nested_too_deeply_is_refused(client: httpx.AsyncClient) -> None:
    def nested(depth: int) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer"}
        for _ in range(depth - 1):
            schema = {"items": schema}
        return schema

    assert (await register(client, nested(64))).status_code == 201
    response = await register(client, nested(65))
    assert response.status_code == 400
    assert "deeper than 64" in response.json()["error"]["message"]


async def test_a_removed_schema_is_gone_from_reads_and_redis(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    before = await written(raw, prefix)
    assert (await register(client)).status_code == 201

    response = await client.delete(path_of(URI))

    assert response.status_code == 200
    assert response.json() == {"deleted": True, "uri": URI}
    assert (await client.get(path_of(URI))).status_code == 404
    assert (await client.get("/ojs/v1/schemas")).json()["schemas"] == []
    assert await written(raw, prefix) == before
    again = await client.delete(path_of(URI))
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "not_found"


async def test_the_list_pages_by_cursor_and_by_offset_in_uri_order(
    client: httpx.AsyncClient,
) -> None:
    uris = [f"urn:ojs:schema:job{n}:v1" for n in (4, 2, 0, 3, 1)]
    for uri in uris:
        assert (await register(client, uri=uri)).status_code == 201

    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/ojs/v1/schemas", params=params)).json()
        seen += [s["uri"] for s in page["schemas"]]
        assert page["pagination"]["total"] == 5
        assert page["pagination"]["offset"] == len(seen) - len(page["schemas"])
        if not page["pagination"]["has_more"]:
            assert "next_cursor" not in page["pagination"]
            break
        cursor = page["pagination"]["next_cursor"]
    assert seen == sorted(uris)
    last = (await client.get("/ojs/v1/schemas", params={"limit": 2, "offset": 4})).json()
    assert [s["uri"] for s in last["schemas"]] == [sorted(uris)[4]]
    assert last["pagination"]["has_more"] is False


@pytest.mark.parametrize(
    "query", ["limit=201", "limit=0", "offset=-1", "cursor=%25%25", "cursor=", "cursor=_w"]
)
async def test_a_bad_list_query_is_refused(client: httpx.AsyncClient, query: str) -> None:
    response = await client.get(f"/ojs/v1/schemas?{query}")

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == query.split("=")[0]


async def test_a_push_whose_args_conform_is_enqueued_with_its_schema(
    client: httpx.AsyncClient,
) -> None:
    assert (await register(client)).status_code == 201

    response = await push(client, ["ada@example.com", "welcome", {"locale": "en"}])

    assert response.status_code == 201, response.text
    job_id = response.json()["job"]["id"]
    assert (await client.get(f"/ojs/v1/jobs/{job_id}")).json()["job"]["schema"] == URI


async def test_a_push_whose_args_do_not_conform_is_refused_naming_the_path(
    client: httpx.AsyncClient, raw: Any, prefix: str, redis_url: str
) -> None:
    assert (await register(client)).status_code == 201
    before = await written(raw, prefix)

    response = await push(client, ["ada@example.com", "welcome", {"locale": 7}])

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "schema_validation"
    assert "args[2].locale" in error["message"]
    assert error["details"]["field"] == "args[2].locale"
    assert error["details"]["schema"] == URI
    assert error["details"]["validation_errors"] == [{
        "path": "$.args[2].locale", "message": "7 is not of type 'string'",
        "schema_path": "#/prefixItems/2/properties/locale/type"}]  # fmt: skip
    assert await written(raw, prefix) == before
    assert await jobs_in_mail(redis_url, prefix) == 0


async def test_a_push_asserts_the_formats_jsonschema_checks(client: httpx.AsyncClient) -> None:
    assert (await register(client)).status_code == 201

    response = await push(client, ["not an address", "welcome"])

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "args[0]"


async def test_a_batch_with_one_job_that_does_not_conform_writes_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str, redis_url: str
) -> None:
    assert (await register(client)).status_code == 201
    before = await written(raw, prefix)
    good = {"type": "email.send", "args": ["ada@example.com", "welcome"], "schema": URI,
            "options": {"queue": "mail"}}  # fmt: skip
    bad = {**good, "args": ["ada@example.com", "goodbye"]}

    response = await client.post("/ojs/v1/jobs/batch", json={"jobs": [good, bad, good]})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "schema_validation"
    assert error["details"]["index"] == 1
    assert error["details"]["field"] == "args[1]"
    assert error["message"].startswith("jobs[1]: args[1] does not conform")
    assert await written(raw, prefix) == before
    assert await jobs_in_mail(redis_url, prefix) == 0
    ok = await client.post("/ojs/v1/jobs/batch", json={"jobs": [good, good]})
    assert ok.status_code == 201


@pytest.mark.parametrize(
    ("schema", "status", "field"),
    [("urn:ojs:schema:unknown:v1", 400, "schema"), (7, 400, "schema"), ("", 400, "schema")],
)
async def test_a_push_naming_no_registered_schema_is_refused(
    client: httpx.AsyncClient, raw: Any, prefix: str, schema: Any, status: int, field: str
) -> None:
    before = await written(raw, prefix)

    response = await push(client, ["ada@example.com", "welcome"], schema)

    assert response.status_code == status
    assert response.json()["error"]["details"]["field"] == field
    assert await written(raw, prefix) == before


async def test_a_push_without_a_schema_is_not_validated(client: httpx.AsyncClient) -> None:
    assert (await register(client)).status_code == 201

    response = await push(client, [1, 2, 3, 4], schema=None)

    assert response.status_code == 201


async def test_a_schema_replaced_or_removed_by_another_server_is_never_served_stale(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given a second server on the same Redis, and this one's validator of the schema cached
    other_app: FastAPI = create_app(connection=redis_url, prefix=prefix, auth=False)
    transport = httpx.ASGITransport(app=other_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as other:
        assert (await register(other, {"prefixItems": [{"type": "string"}]})).status_code == 201
        first = (await client.get(path_of(URI))).json()["schema"]["created_at"]
        assert (await push(client, ["ada"])).status_code == 201

        # When the other server replaces it
        replaced = await register(other, {"prefixItems": [{"type": "integer"}]})

        # Then this one validates against the new schema at once, which kept its created_at
        assert replaced.json()["schema"]["created_at"] == first
        assert (await push(client, ["ada"])).status_code == 400
        assert (await push(client, [7])).status_code == 201

        # And once the other server removes it, this one refuses PUSHes that name it
        assert (await other.delete(path_of(URI))).status_code == 200
        gone = await push(client, [7])
        assert gone.status_code == 400
        assert "not registered" in gone.json()["error"]["message"]


async def test_the_cache_of_validators_is_bounded_least_recently_used_out(
    client: httpx.AsyncClient, app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schemas, "CACHE_SIZE", 2)
    uris = [f"urn:ojs:schema:job{n}:v1" for n in range(3)]
    for n, uri in enumerate(uris):
        assert (await register(client, {"maxItems": n + 1}, uri=uri)).status_code == 201
        assert (await push(client, ["ada"], uri)).status_code == 201

    cache = backend_of(app).schemas._cache

    assert list(cache) == [schemas.digest('{"maxItems":2}'), schemas.digest('{"maxItems":3}')]


async def test_a_schema_whose_refs_recurse_without_end_cannot_be_applied(
    client: httpx.AsyncClient,
) -> None:
    assert (await register(client, {"$ref": "#"})).status_code == 201

    response = await push(client, ["ada"])

    assert response.status_code == 422
    assert response.json()["error"]["details"]["field"] == "schema"


async def test_a_workflow_with_a_job_that_does_not_conform_is_refused_before_any_write(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    assert (await register(client)).status_code == 201
    before = await written(raw, prefix)
    step = {"type": "email.send", "args": ["ada@example.com", "welcome"], "schema": URI,
            "options": {"queue": "mail"}}  # fmt: skip
    bad = {**step, "args": ["ada@example.com", 7]}

    response = await client.post("/ojs/v1/workflows", json={"type": "chain",
                                                            "steps": [step, bad]})  # fmt: skip

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "schema_validation"
    assert error["details"]["field"] == "steps[1].args[1]"
    assert await written(raw, prefix) == before


async def test_a_workflow_step_enqueued_after_its_schema_was_removed_still_runs(
    client: httpx.AsyncClient,
) -> None:
    # Given a chain whose two steps conform to a schema when it is created
    assert (await register(client)).status_code == 201
    step = {"type": "email.send", "args": ["ada@example.com", "welcome"], "schema": URI,
            "options": {"queue": "mail"}}  # fmt: skip
    created = await client.post("/ojs/v1/workflows", json={"type": "chain",
                                                           "steps": [step, step]})  # fmt: skip
    assert created.status_code == 201, created.text
    workflow_id = created.json()["workflow"]["id"]

    # When the schema is removed, and then the first step completes
    assert (await client.delete(path_of(URI))).status_code == 200
    (first,) = (await client.post("/ojs/v1/workers/fetch", json={"queues": ["mail"]})).json()[
        "jobs"
    ]
    acked = await client.post("/ojs/v1/workers/ack", json={"job_id": first["id"]})
    assert acked.status_code == 200, acked.text

    # Then the second step is enqueued all the same: the workflow was accepted with it
    (second,) = (await client.post("/ojs/v1/workers/fetch", json={"queues": ["mail"]})).json()[
        "jobs"
    ]
    workflow = (await client.get(f"/ojs/v1/workflows/{workflow_id}")).json()["workflow"]
    assert second["id"] != first["id"]
    assert second["id"] in json.dumps(workflow)


async def test_the_manifest_declares_schema_validation(client: httpx.AsyncClient) -> None:
    manifest = (await client.get("/ojs/manifest")).json()

    assert manifest["capabilities"]["schema_validation"] is True
