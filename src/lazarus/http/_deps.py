"""What every route of the JSON API shares: the operators, the token check, validated names
and ids, and the error an endpoint raises on purpose (:class:`ApiError`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator, BaseModel
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._keys import MAX_NAME_LENGTH, validate_job_id, validate_queue_name
from ..errors import RedisUnavailableError
from ..operators import Operators
from .auth import Principal, Role
from .schemas import ErrorResponse

# Dead-letter reads raise redis-py's own errors when Redis is down; queue methods raise ours.
REDIS_DOWN = (RedisUnavailableError, RedisConnectionError, RedisTimeoutError)


class ApiError(Exception):
    """An error response an endpoint chose to send: ``{"error": {"code", "message"}}``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers


def get_ops(request: Request) -> Operators:
    """The :class:`~lazarus.operators.Operators` of the app serving ``request``."""
    ops: Operators = request.app.state.ops
    return ops


Ops = Annotated[Operators, Depends(get_ops)]

_bearer = HTTPBearer(auto_error=False, description="A token given to `lazarus serve`.")


def principal(
    request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """Who is asking, as the guard (:mod:`lazarus.http.guard`) authenticated them; a route
    the guard let through unauthenticated has no principal and is refused (401)."""
    found: Principal | None = getattr(request.state, "principal", None)
    if found is None:
        raise ApiError(401, "unauthorized", "missing 'Authorization: Bearer <token>' header",
                       headers={"WWW-Authenticate": "Bearer"})  # fmt: skip
    return found


Caller = Annotated[Principal, Depends(principal)]


def require_role(role: Role) -> Any:
    """A dependency refusing (403) a caller below ``role``. The guard checks the same by
    method and path; routes state theirs too, and the OpenAPI document shows the scheme."""

    def check(caller: Caller) -> None:
        if not caller.may(role):
            raise ApiError(403, "forbidden", f"this needs the {role} role")

    return Depends(check)


def require_token(caller: Caller) -> None:
    """A state-changing route: the caller must be an operator or more."""
    if not caller.may(Role.OPERATOR):
        raise ApiError(403, "forbidden", f"this needs the {Role.OPERATOR} role")


def query_names(dependant: Dependant) -> list[str]:
    """The query parameters a route (its ``dependant``) declares, its dependencies' included,
    in order; a model of parameters (the dead letter filter) stands for its fields."""
    names: list[str] = []
    for param in dependant.query_params:
        model = param.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            names += [info.alias or name for name, info in model.model_fields.items()]
        else:
            names.append(param.alias)
    for dependency in dependant.dependencies:
        names += query_names(dependency)
    return list(dict.fromkeys(names))


def known_query_only(request: Request) -> None:
    """Refuse (422, naming it) a query parameter the route does not declare. Dropped
    silently, a misspelt filter (``jobType`` for ``job_type``) or flag (``dry_run`` for
    ``dryRun``) made a bulk purge or retry act on more than it was asked to."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = query_names(route.dependant)
    unknown = [n for n in dict.fromkeys(request.query_params.keys()) if n not in known]
    if unknown:
        takes = f"this route takes {', '.join(known)}" if known else "this route takes none"
        message = f"{', '.join(unknown)}: unknown query parameter; {takes}"
        raise ApiError(422, "invalid_parameter", message, field=unknown[0])


KnownQueryOnly = Depends(known_query_only)
"""A dependency for every route of the JSON API: :func:`known_query_only`."""


def _name(field: str) -> AfterValidator:
    return AfterValidator(lambda value: validate_queue_name(value, field))


def _job_id(field: str) -> AfterValidator:
    return AfterValidator(lambda value: validate_job_id(value, field))


_NAME_RULES = (
    "1 to 200 characters, no whitespace or control characters; braces only as a leading hash "
    "tag ({payments}-dlq)"
)

QueueName = Annotated[
    str,
    Path(min_length=1, max_length=MAX_NAME_LENGTH, description=f"Queue name ({_NAME_RULES})."),
    _name("name"),
]
JobId = Annotated[
    str,
    Path(min_length=1, max_length=MAX_NAME_LENGTH, description=f"Job id ({_NAME_RULES})."),
    _job_id("id"),
]
DlqName = Annotated[
    str,
    Query(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description=f"The dead letter queue to read ({_NAME_RULES}).",
    ),
    _name("dlq"),
]
OptionalDlqName = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description=f"Look in this dead letter queue only ({_NAME_RULES}); default: every one.",
    ),
    AfterValidator(lambda value: None if value is None else validate_queue_name(value, "dlq")),
]


def checked_name(value: str, field: str) -> str:
    """``value`` if it is a valid queue name, else an :class:`ApiError` 422 naming ``field``."""
    try:
        return validate_queue_name(value, field)
    except (TypeError, ValueError) as exc:
        raise ApiError(422, "invalid_parameter", str(exc), field=field) from None


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


ERRORS: dict[int | str, dict[str, Any]] = {
    422: _error("A parameter is invalid; the message names it."),
    503: _error("Redis is unreachable."),
}
"""Error responses every route may send, for the OpenAPI document."""

AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    401: _error("The bearer token is missing or wrong."),
    403: _error("The token's role may not do this."),
}
GUARD_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _error("The bearer token is missing or wrong."),
    403: _error("The token's role may not do this, or the request came from another origin."),
    413: _error("The request body is over the server's limit."),
    421: _error("The Host header names a host this server does not serve."),
    429: _error("Too many failed tokens from this address; retry later."),
}
"""What the guard (:mod:`lazarus.http.guard`) may answer on any route, for the OpenAPI
document."""

NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _error("No such job, queue or id.")}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: _error("The job is not a dead letter, or not in a state that allows this."),
}
