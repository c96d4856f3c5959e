"""The OJS schema routes (``/v1/schemas``): list, register, read and remove the JSON Schemas
that PUSH validates ``args`` against (:mod:`~lazarus.ojs.schemas`)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema_specifications import REGISTRY as METASCHEMAS  # jsonschema's own dependency
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from .._codec import encode
from .backend import Backend
from .envelope import TYPE_RE, invalid, storable
from .errors import OjsError, ojs_json
from .routes import _AUTH, OjsBackend, json_body
from .schemas import MAX_SCHEMA_BYTES, Registration, Schemas

router = APIRouter()

MAX_URI = 1024  # characters of a schema's URI
MAX_DEPTH = 64  # nesting of a schema's JSON: the metaschema's check recurses through it
MAX_VERSION = 2**31 - 1
DRAFT = "https://json-schema.org/draft/2020-12/schema"
# A URI has a scheme (RFC 3986 §3.1) then no whitespace nor control character.
URI_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s\x00-\x1f\x7f]+")
_NOT_2020_12 = "The provided JSON Schema is not valid draft 2020-12."


def schemas_of(request: Request) -> Schemas:
    """The schema registry of the app serving ``request``."""
    backend: Backend = request.app.state.ojs
    return backend.schemas


SchemaRegistry = Annotated[Schemas, Depends(schemas_of)]


@router.get("/v1/schemas")
async def list_schemas(
    schemas: SchemaRegistry,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
    cursor: str | None = None,
) -> Response:
    """The registered schemas by URI, without the schemas themselves, a page at a time."""
    return ojs_json(await schemas.page(limit, offset, cursor))


@router.post("/v1/schemas", dependencies=_AUTH, status_code=201)
async def register_schema(request: Request, backend: OjsBackend) -> Response:
    """Register a schema, or replace the one registered under its URI."""
    registration = parse_registration(await json_body(request))
    return ojs_json({"schema": await backend.schemas.register(registration, backend.now())}, 201)


@router.get("/v1/schemas/{uri:path}")
async def get_schema(uri: str, schemas: SchemaRegistry) -> Response:
    """The schema registered under ``uri`` (URL-encoded in the path)."""
    return ojs_json({"schema": await schemas.get(uri)})


@router.delete("/v1/schemas/{uri:path}", dependencies=_AUTH)
async def delete_schema(uri: str, schemas: SchemaRegistry) -> Response:
    """Remove the schema registered under ``uri``: jobs pushed with it are not affected."""
    await schemas.delete(uri)
    return ojs_json({"deleted": True, "uri": uri})


def parse_registration(body: Any) -> Registration:
    """Validate a registration ``{"uri", "type", "version", "schema"}``: a 400 naming the
    field, ``details.schema_error`` for a schema that is not valid draft 2020-12."""
    if not isinstance(body, dict):
        raise OjsError(400, "invalid_request", "the request body must be a JSON object")
    for field in ("uri", "type", "version", "schema"):
        if field not in body:
            raise invalid(f"{field} is required", field=field)
    uri, job_type, version = body["uri"], body["type"], body["version"]
    if not isinstance(uri, str) or len(uri) > MAX_URI or not URI_RE.fullmatch(uri):
        raise invalid(f"uri must be a URI (a scheme, ':', then no spaces) of at most {MAX_URI}"
                      f" characters, such as 'urn:ojs:schema:email.send:v1', got {uri!r}",
                      field="uri")  # fmt: skip
    storable(uri, "uri")  # a lone surrogate: no key can hold it
    if not isinstance(job_type, str) or len(job_type) > 255 or not TYPE_RE.fullmatch(job_type):
        raise invalid(f"type must be a job type (dot-separated [a-z][a-z0-9_-]* segments), got "
                      f"{job_type!r}", field="type")  # fmt: skip
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
        raise invalid(f"version must be an integer from 1 to {MAX_VERSION}, got {version!r}",
                      field="version")  # fmt: skip
    return Registration(uri, job_type, version, _schema_text(body["schema"]))


def _schema_text(schema: Any) -> str:
    """``schema`` as stored, once it is known to be valid draft 2020-12 within the bounds."""
    if not isinstance(schema, (dict, bool)):
        raise invalid("schema must be a JSON Schema: an object (or true, false)", field="schema")
    if _depth(schema) > MAX_DEPTH:
        raise invalid(f"schema nests deeper than {MAX_DEPTH} levels", field="schema")
    try:
        text = encode(schema, field="schema")
    except (TypeError, ValueError) as exc:
        raise invalid(str(exc), field="schema") from None
    size = len(text.encode())
    if size > MAX_SCHEMA_BYTES:
        raise invalid(f"schema is {size} bytes as compact JSON, over the limit of "
                      f"{MAX_SCHEMA_BYTES} (64 KiB)", field="schema")  # fmt: skip
    if (
        isinstance(schema, dict)
        and "$schema" in schema
        and schema["$schema"] not in (DRAFT, DRAFT + "#")
    ):
        raise _not_valid("$schema must reference draft 2020-12", "#/$schema")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        pointer = "".join(f"/{p}" for p in exc.absolute_path)
        raise _not_valid(f"{'#' + pointer}: {exc.message}", "#" + pointer) from None
    _check_refs(schema)
    return text


def _check_refs(schema: Any) -> None:
    """Refuse a ``$ref`` (or ``$dynamicRef``) that does not resolve within the schema (or to a
    metaschema): lazarus fetches no remote schema."""
    resource: Resource[Any] = DRAFT202012.create_resource(schema)
    metaschemas: Registry[Any] = METASCHEMAS
    stack = [(metaschemas.resolver_with_root(resource), resource)]
    while stack:
        resolver, resource = stack.pop()
        contents = resource.contents
        for keyword in ("$ref", "$dynamicRef"):
            ref = contents.get(keyword) if isinstance(contents, dict) else None
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Unresolvable:
                    reason = f"{keyword} {ref!r} does not resolve within the schema"
                    raise _not_valid(reason + " (lazarus fetches none)", None) from None
        stack.extend((resolver.in_subresource(sub), sub) for sub in resource.subresources())


def _not_valid(reason: str, pointer: str | None) -> OjsError:
    details: dict[str, Any] = {"field": "schema", "schema_error": reason}
    if pointer is not None:
        details["schema_path"] = pointer
    return OjsError(400, "invalid_request", f"{_NOT_2020_12} {reason}", details=details)


def _depth(value: Any) -> int:
    """How deep ``value`` nests (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest
