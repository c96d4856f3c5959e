"""The OJS schema registry: JSON Schemas (draft 2020-12) registered by URI, against which a
PUSH that names one in its ``schema`` field has its ``args`` validated before anything is
written.

Keys (the ``{schemas}`` hash tag keeps them in one cluster slot, so that a registration or a
removal writes all three in one transaction):

- ``<prefix>:ojs:{schemas}:uris``  ZSET  every registered URI, each scored 0: in byte order,
                                         which pages walk (by rank, or from a cursor by lex)
- ``<prefix>:ojs:{schemas}:meta``  HASH  URI -> JSON ``{type, version, created_at,
                                         updated_at, sha}``; ``sha`` is the SHA-256 of the
                                         schema's text, which names its compiled validator
- ``<prefix>:ojs:{schemas}:docs``  HASH  URI -> the schema, compact JSON (at most
                                         :data:`MAX_SCHEMA_BYTES`)

Validators are compiled once per process and cached by the SHA-256 of their schema's text
(:data:`CACHE_SIZE` of them, least recently used out). A PUSH that names schemas reads their
``sha`` (one ``HMGET``, whatever the batch's size) and the schema itself only on a cache
miss: a schema replaced or deleted, by this server or another, is seen by the next PUSH,
never served stale, for the cost of one small read per PUSH that names one.
"""

from __future__ import annotations

import base64
import binascii
import collections
import dataclasses
import hashlib
import itertools
import json
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.exceptions import Unresolvable

from .._codec import text as _text
from .._connection import Client
from .envelope import Submission, invalid
from .errors import OjsError
from .states import iso

MAX_SCHEMA_BYTES = 64 * 1024
"""The largest schema the registry takes, as compact JSON (UTF-8)."""
CACHE_SIZE = 128
"""How many compiled validators a server keeps (least recently used out)."""
MAX_REPORTED = 10  # validation errors told in a mismatch's details
MAX_MESSAGE = 300  # characters of one validation error's message
# Formats asserted (draft 2020-12 leaves that to the implementation): those jsonschema checks
# with no optional package, so that what passes does not depend on what else is installed.
FORMATS = ("date", "email", "ipv4", "ipv6", "regex", "uuid")
_FORMAT_CHECKER = FormatChecker(FORMATS)
# Metaschemas (jsonschema adds them) and nothing else: a $ref to anything outside the schema
# is refused when it is registered, and never fetched.
_NO_REMOTE: Registry[Any] = Registry()


def compile_schema(schema: Any) -> Draft202012Validator:
    """A draft 2020-12 validator of ``schema`` that asserts :data:`FORMATS` and resolves no
    remote ``$ref``."""
    return Draft202012Validator(schema, registry=_NO_REMOTE, format_checker=_FORMAT_CHECKER)


def digest(text: str) -> str:
    """The SHA-256 of a schema's stored text: what its cached validator is known by."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Registration:
    """A validated ``POST /ojs/v1/schemas``: the schema as it is stored (compact JSON)."""

    uri: str
    type: str
    version: int
    text: str


class Schemas:
    """The schema registry under one prefix, and this process's cache of its validators."""

    def __init__(self, client: Client, prefix: str) -> None:
        self.client = client
        base = f"{prefix}:ojs:{{schemas}}"
        self.uris = f"{base}:uris"
        self.meta = f"{base}:meta"
        self.docs = f"{base}:docs"
        self._cache: collections.OrderedDict[str, Draft202012Validator] = collections.OrderedDict()

    async def register(self, reg: Registration, now: int) -> dict[str, Any]:
        """Register ``reg``, or replace the schema registered under its URI (which keeps its
        ``created_at``); its view."""
        old = await self.client.hget(self.meta, reg.uri)
        created = json.loads(old)["created_at"] if old is not None else now
        meta = {"type": reg.type, "version": reg.version, "created_at": created,
                "updated_at": now, "sha": digest(reg.text)}  # fmt: skip
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zadd(self.uris, {reg.uri: 0})
            pipe.hset(self.meta, reg.uri, json.dumps(meta))
            pipe.hset(self.docs, reg.uri, reg.text)
            await pipe.execute()
        return _view(reg.uri, meta)

    async def get(self, uri: str) -> dict[str, Any]:
        """The schema registered under ``uri``, with the schema itself; 404 when none is."""
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hget(self.meta, uri)
            pipe.hget(self.docs, uri)
            meta, doc = await pipe.execute()
        if meta is None or doc is None:
            raise _not_found(uri)
        return {**_view(uri, json.loads(meta)), "schema": json.loads(doc)}

    async def delete(self, uri: str) -> None:
        """Remove the schema registered under ``uri``; 404 when none is. Jobs pushed with it
        are not affected; a PUSH that names it after is refused."""
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zrem(self.uris, uri)
            pipe.hdel(self.meta, uri)
            pipe.hdel(self.docs, uri)
            removed, _, _ = await pipe.execute()
        if not removed:
            raise _not_found(uri)

    async def page(self, limit: int, offset: int, cursor: str | None) -> dict[str, Any]:
        """A page of the registered schemas in URI order, without the schemas themselves:
        ``limit`` from ``offset``, or after ``cursor`` (a page's ``next_cursor``) when given.
        Reads the page's entries only, whatever the registry's size."""
        after = _after(cursor) if cursor is not None else None
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zcard(self.uris)
            if after is None:
                pipe.zrange(self.uris, offset, offset + limit)  # one more: is there more?
            else:
                pipe.zlexcount(self.uris, "-", b"[" + after)
                pipe.zrangebylex(self.uris, b"(" + after, "+", 0, limit + 1)
            total, *rest = await pipe.execute()
        if after is not None:
            offset, found = int(rest[0]), rest[1]
        else:
            found = rest[0]
        uris = [_text(u) for u in found]
        more = len(uris) > limit
        uris = uris[:limit]
        metas = await self.client.hmget(self.meta, uris) if uris else []
        items = [_view(u, json.loads(m)) for u, m in zip(uris, metas) if m is not None]
        pagination: dict[str, Any] = {"total": int(total), "limit": limit, "offset": offset,
                                      "has_more": more}  # fmt: skip
        if more:
            pagination["next_cursor"] = base64.urlsafe_b64encode(uris[-1].encode()).decode()
        return {"schemas": items, "pagination": pagination}

    async def first_failure(self, subs: list[Submission]) -> tuple[int, OjsError] | None:
        """Validate the ``args`` of each job whose envelope names a ``schema`` against it:
        the position and error of the first job refused, ``None`` when all pass. A schema that
        is not registered refuses its job (the spec asks for ``args`` to be validated before
        the job is enqueued, and nothing can validate them)."""
        named: dict[int, str] = {}
        for index, sub in enumerate(subs):
            value = sub.envelope.get("schema")
            if value is None:
                continue
            if not isinstance(value, str) or not value:
                return index, invalid("schema must be a schema URI string", field="schema")
            named[index] = value
        if not named:
            return None
        validators = await self._validators(list(dict.fromkeys(named.values())))
        for index, uri in named.items():
            error = _check(validators.get(uri), uri, subs[index].args)
            if error is not None:
                return index, error
        return None

    async def _validators(self, uris: list[str]) -> dict[str, Draft202012Validator]:
        """The validators of the schemas registered under ``uris`` (those that are)."""
        metas = await self.client.hmget(self.meta, uris)
        found: dict[str, Draft202012Validator] = {}
        missing: list[str] = []
        for uri, meta in zip(uris, metas, strict=True):
            if meta is None:
                continue
            sha = json.loads(meta)["sha"]
            if sha in self._cache:
                self._cache.move_to_end(sha)
                found[uri] = self._cache[sha]
            else:
                missing.append(uri)
        docs = await self.client.hmget(self.docs, missing) if missing else []
        for uri, doc in zip(missing, docs, strict=True):
            if doc is not None:  # else deleted since: not registered
                found[uri] = self._compiled(_text(doc))
        return found

    def _compiled(self, text: str) -> Draft202012Validator:
        """The validator of the schema ``text`` (read now: the current one, even if it
        was replaced after its ``sha`` was read), kept in the cache."""
        sha = digest(text)
        validator = compile_schema(json.loads(text))
        self._cache[sha] = validator
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return validator


def _check(validator: Draft202012Validator | None, uri: str, args: list[Any]) -> OjsError | None:
    """The error of ``args`` against the schema ``uri`` (``validator``), or ``None``."""
    if validator is None:
        return OjsError(400, "invalid_request", f"schema {uri!r} is not registered "
                        "(POST /ojs/v1/schemas registers it)",
                        details={"field": "schema", "schema": uri})  # fmt: skip
    try:
        errors = list(itertools.islice(validator.iter_errors(args), MAX_REPORTED))
    except (Unresolvable, RecursionError) as exc:  # a $ref cycle that never ends
        kind = "its $refs recurse without end" if isinstance(exc, RecursionError) else str(exc)
        return OjsError(422, "invalid_request", f"schema {uri!r} cannot be applied: {kind}",
                        details={"field": "schema", "schema": uri})  # fmt: skip
    if not errors:
        return None
    first = best_match(errors)
    assert first is not None
    field = _field(first)
    return OjsError(
        400, "schema_validation",
        f"{field} does not conform to schema {uri!r}: {_message(first)}",
        details={"field": field, "schema": uri,
                 "validation_errors": [_described(e) for e in errors]},
    )  # fmt: skip


def _field(error: ValidationError) -> str:
    """Where in the request ``error`` is, as other errors name fields: ``args[0].locale``."""
    path = "args"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _described(error: ValidationError) -> dict[str, str]:
    """``error`` as the spec's ``validation_errors`` entries are: JSONPath, message, and the
    JSON Pointer of the keyword that failed."""
    pointer = "".join(
        "/" + str(p).replace("~", "~0").replace("/", "~1") for p in error.absolute_schema_path
    )
    return {"path": "$." + _field(error), "message": _message(error), "schema_path": "#" + pointer}


def _message(error: ValidationError) -> str:
    message = error.message
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def _view(uri: str, meta: dict[str, Any]) -> dict[str, Any]:
    times = {"created_at": iso(meta["created_at"]), "updated_at": iso(meta["updated_at"])}
    return {"uri": uri, "type": meta["type"], "version": meta["version"], **times}


def _not_found(uri: str) -> OjsError:
    return OjsError(404, "not_found", f"schema {uri!r} not found", details={"uri": uri},
                    hint="GET /ojs/v1/schemas lists the registered schemas.")  # fmt: skip


def _after(cursor: str) -> bytes:
    """The URI a page's ``next_cursor`` ends after."""
    try:
        after = base64.b64decode(cursor.encode("ascii"), altchars=b"-_", validate=True)
        after.decode()  # every URI is text
    except (UnicodeError, binascii.Error):
        after = b""
    if not after:
        raise invalid(f"cursor {cursor!r} is not one this server made", field="cursor")
    return after
