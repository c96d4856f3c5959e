"""OJS cron jobs: a recurring job registered by name, kept as a lazarus repeatable job (a
schedule) in the queue of its job template, with ``overlap="skip"`` unless the client allows
overlaps, and its occurrences named by UUIDv7s (``job_ids="uuid7"``). lazarus does the
scheduling; this module validates a registration, keeps the name -> definition registry and
shows a cron job as OJS does. What a produced job needs to be an OJS job is in
:mod:`~lazarus.ojs.cron_jobs`.

Keys:

- ``<prefix>:ojs:cron``                 HASH    cron name -> its definition (JSON): the
                                                expression as sent and the engine's pattern,
                                                time zone, overlap policy, queue, schedule
                                                key, job template (``env``), retry policy,
                                                ``vis``, ``timeout`` and ``created_at``
- ``<prefix>:ojs:cron:<name>:skipped``  STRING  the last skipped occurrence announced
                                                (``cron.skipped``), so that it is told once
- ``<prefix>:{<queue>}:repeat:ojs-cron.<name>``  the cron job's schedule (the engine's)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import zoneinfo
from typing import Any

from .._codec import text as _text
from .._schedule import Repeat, RepeatableJob, occurrence_due
from ..masking import masked
from .backend import Backend
from .envelope import Submission, invalid, parse_submission
from .errors import OjsError
from .jobs import engine_priority
from .states import iso

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
KEY_PREFIX = "ojs-cron."  # a cron job's schedule key is this and its name
OVERLAP_POLICIES = ("skip", "allow")
MAX_TEXT = 200  # characters of an expression or a time zone name
# Shorthands, as Vixie cron reads them; lazarus's parser takes fields only.
SHORTHANDS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}  # fmt: skip
_JOB_FIELDS = ("type", "args", "meta", "options", "schema")
# Fixed times, which jobs due again and again cannot share.
_SCHEDULING = (("scheduled_at", "scheduled_at"), ("options", "delay_until"),
               ("options", "scheduled_at"), ("expires_at", "expires_at"),
               ("options", "expires_at"))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Registration:
    """A validated ``POST /ojs/v1/cron``: the definition to store and the job template."""

    definition: dict[str, Any]
    job: Submission
    where: str = ""  # where the request has the job template: "job_template." or ""


def registry(backend: Backend) -> str:
    """The key of the name -> definition registry."""
    return f"{backend.prefix}:ojs:cron"


def skip_marker(backend: Backend, name: str) -> str:
    """The key holding the last skipped occurrence of ``name`` that was announced."""
    return f"{registry(backend)}:{name}:skipped"


def name_of(key: str) -> str | None:
    """The cron job name of the schedule ``key``, or ``None`` for a schedule OJS did not make."""
    return key[len(KEY_PREFIX) :] if key.startswith(KEY_PREFIX) else None


def parse_registration(body: Any, now: int) -> Registration:
    """Validate a registration (``expression`` / ``job_template`` as the OpenAPI document has
    it, or ``cron`` / ``type``, ``args``, ``meta``, ``options`` as the HTTP binding's text
    does); every error is a 400 (or the retry policy's 422) naming the field."""
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    name = body.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise invalid(f"name must be 1 to 128 letters, digits, '.', '_' or '-' (not first), "
                      f"got {name!r}", field="name")  # fmt: skip
    expression = _expression(body)
    timezone = body.get("timezone", "UTC")
    if not isinstance(timezone, str) or timezone not in _time_zones():
        shown = repr(timezone) if len(repr(timezone)) <= MAX_TEXT else "a longer one"
        raise invalid(f"timezone must be an IANA time zone name such as 'America/New_York', "
                      f"got {shown}", field="timezone")  # fmt: skip
    pattern = SHORTHANDS.get(expression.strip().lower(), expression)
    try:
        Repeat.parse({"pattern": pattern, "tz": timezone})
    except ValueError as exc:
        raise invalid(
            f"expression {expression!r} is not a cron expression (5 fields, or 6 "
            f"with seconds first, or @hourly, @daily, ...): {exc.__cause__}",
            field="expression",
        ) from None
    overlap = body.get("overlap_policy", "skip")
    if overlap not in OVERLAP_POLICIES:
        unsupported = " ('cancel' is not supported)" if overlap == "cancel" else ""
        raise invalid(f"overlap_policy must be 'skip' (the default) or 'allow', got "
                      f"{overlap!r}{unsupported}", field="overlap_policy")  # fmt: skip
    if body.get("enabled", True) is not True:
        raise invalid("enabled must be true: a cron job is enabled while it is registered",
                      field="enabled")  # fmt: skip
    template, where = _template(body)
    job = _parse_job(template, where)
    definition = {
        "name": name, "expression": expression, "pattern": pattern, "timezone": timezone,
        "overlap_policy": overlap, "queue": job.queue, "key": KEY_PREFIX + name,
        "env": {k: v for k, v in job.envelope.items() if k != "id"},
        "policy": job.policy.to_json(), "vis": job.visibility_ms, "timeout": job.timeout_ms,
        "created_at": now,
    }  # fmt: skip
    return Registration(definition, job, where)


def _expression(body: dict[str, Any]) -> str:
    given = [body[f] for f in ("expression", "cron") if f in body]
    if not given:
        raise invalid("expression is required (a cron expression such as '0 9 * * *')",
                      field="expression")  # fmt: skip
    if len(given) == 2 and given[0] != given[1]:
        raise invalid("expression and cron differ: give the cron expression once",
                      field="cron")  # fmt: skip
    if not isinstance(given[0], str) or not given[0].strip() or len(given[0]) > MAX_TEXT:
        shown = repr(given[0]) if len(repr(given[0])) <= MAX_TEXT else "a longer one"
        raise invalid(f"expression must be a cron expression string of at most {MAX_TEXT} "
                      f"characters, got {shown}", field="expression")  # fmt: skip
    return given[0]


@functools.cache
def _time_zones() -> frozenset[str]:
    """The IANA time zone names (read once: the tz database does not change while serving);
    not the system's own links to one (``localtime``)."""
    return frozenset(zoneinfo.available_timezones()) - {"localtime", "posixrules"}


def _template(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The job template and where it was found (``job_template.`` or the body itself)."""
    if "job_template" not in body:
        return {k: body[k] for k in _JOB_FIELDS if k in body}, ""
    template = body["job_template"]
    if not isinstance(template, dict):
        raise invalid("job_template must be a JSON object", field="job_template")
    both = [k for k in _JOB_FIELDS if k in body]
    if both:
        raise invalid(f"give the job once: job_template, or {', '.join(both)} beside it",
                      field=both[0])  # fmt: skip
    return template, "job_template."


def _parse_job(template: dict[str, Any], where: str) -> Submission:
    if "id" in template:
        raise invalid(f"{where}id: each job a cron job makes gets an id of its own",
                      field=f"{where}id")  # fmt: skip
    for parent, field in _SCHEDULING:
        holder = template if parent == field else template.get(parent)
        if isinstance(holder, dict) and field in holder:
            path = field if parent == field else f"{parent}.{field}"
            raise invalid(f"{where}{path}: a cron job's jobs are due when its expression says, "
                          "and expire with no fixed time", field=where + path)  # fmt: skip
    try:
        job = parse_submission(template)
    except OjsError as exc:
        raise _within(exc, where) from None
    if job.pending:
        raise invalid(f"{where}options.pending: a cron job's jobs are available when due, not "
                      "staged", field=f"{where}options.pending")  # fmt: skip
    if job.unique is not None:  # its jobs are the engine's repeats, added without OJS's check
        raise invalid(f"{where}options.unique: a cron job's jobs are not unique jobs (its "
                      "overlap_policy says whether one may start while another runs)",
                      field=f"{where}options.unique")  # fmt: skip
    return job


def _within(error: OjsError, where: str) -> OjsError:
    """``error`` about the job template found at ``where``: its message and its
    ``details.field`` say so (``job_template.args[0]``)."""
    details = error.details
    if where and details and isinstance(details.get("field"), str):
        details = {**details, "field": where + details["field"]}
    return OjsError(error.status, error.code, where + error.message, details=details,
                    hint=error.hint)  # fmt: skip


def engine_options(job: Submission) -> dict[str, Any]:
    """The options of ``Queue.add`` for each job of the cron job, as a PUSH of it has."""
    return {
        "attempts": max(job.policy.max_attempts, 1),
        "backoff": {"type": "exponential", "delay": job.policy.initial_interval_ms},
        "priority": engine_priority(job.priority), "timeout": job.timeout_ms,
    }  # fmt: skip


def repeat_option(definition: dict[str, Any]) -> dict[str, Any]:
    """The ``repeat`` option of the cron job's schedule."""
    return {
        "pattern": definition["pattern"], "tz": definition["timezone"],
        "key": definition["key"], "job_ids": "uuid7",
        "overlap": "allow" if definition["overlap_policy"] == "allow" else "skip",
    }  # fmt: skip


async def register(backend: Backend, registration: Registration) -> dict[str, Any]:
    """Register the cron job: 409 ``duplicate`` when its name is taken; a 400 naming the field
    when its template's args do not conform to the schema it names, as a PUSH's would not (the
    jobs it makes are not checked again, so that a schema replaced or removed since does not
    stop the cron job)."""
    definition, job = registration.definition, registration.job
    failed = await backend.schemas.first_failure([job])
    if failed is not None:
        raise _within(failed[1], registration.where)
    name = definition["name"]
    if not await backend.client.hsetnx(registry(backend), name, json.dumps(definition)):
        hint = "Delete it first to register it again with other settings."
        raise OjsError(409, "duplicate", f"a cron job named {name!r} exists already", hint=hint)
    try:
        await backend.queue(job.queue).add(
            job.type, job.args, repeat=repeat_option(definition), **engine_options(job)
        )
    except BaseException:
        await backend.client.hdel(registry(backend), name)
        raise
    await backend.client.sadd(backend.records.queues, job.queue)  # swept by the server
    return view(definition, await schedule_of(backend, definition))


async def unregister(backend: Backend, name: str) -> dict[str, Any]:
    """Remove the cron job and its pending job (one that has started runs on); 404 when none."""
    definition = await definition_of(backend, name)
    if definition is None:
        raise OjsError(404, "not_found", f"cron job {name!r} not found")
    await backend.queue(definition["queue"]).remove_repeatable_by_key(definition["key"])
    await backend.client.hdel(registry(backend), name)
    await backend.client.delete(skip_marker(backend, name))
    return view(definition, None)


async def definition_of(backend: Backend, name: str) -> dict[str, Any] | None:
    """The definition of cron job ``name``, or ``None``."""
    if not NAME_RE.fullmatch(name):
        return None  # no such name can be registered
    raw = await backend.client.hget(registry(backend), name)
    return None if raw is None else dict(json.loads(raw))


async def listing(backend: Backend, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """A page of the cron jobs, by name, and how many there are."""
    raw = {_text(k): v for k, v in (await backend.client.hgetall(registry(backend))).items()}
    names = sorted(raw)
    page = [json.loads(raw[n]) for n in names[offset : offset + limit]]
    async with backend.client.pipeline(transaction=False) as pipe:
        for definition in page:
            pipe.hgetall(backend.keys(definition["queue"]).repeat(definition["key"]))
        schedules = await pipe.execute()
    views = [view(d, _schedule(d, s)) for d, s in zip(page, schedules, strict=True)]
    return views, len(names)


async def schedule_of(backend: Backend, definition: dict[str, Any]) -> RepeatableJob | None:
    """The engine's schedule of the cron job, or ``None`` once it is gone."""
    keys = backend.keys(definition["queue"])
    return _schedule(definition, await backend.client.hgetall(keys.repeat(definition["key"])))


def _schedule(definition: dict[str, Any], raw: dict[Any, Any]) -> RepeatableJob | None:
    if not raw:
        return None
    return RepeatableJob.from_fields(
        definition["key"], {_text(k): _text(v) for k, v in raw.items()}
    )


def view(definition: dict[str, Any], schedule: RepeatableJob | None) -> dict[str, Any]:
    """The cron job as OJS shows it: the OpenAPI document's fields (``expression``,
    ``job_template``, ``enabled``) and the HTTP binding's (``cron``, ``type``, ``args``,
    ``options``, ``status``) both."""
    env = dict(definition["env"])
    env["args"] = masked(env.get("args", []))
    last = schedule.last_run if schedule is not None else None
    shown = {
        "name": definition["name"], "expression": definition["expression"],
        "cron": definition["expression"], "timezone": definition["timezone"],
        "overlap_policy": definition["overlap_policy"], "enabled": schedule is not None,
        "status": "active" if schedule is not None else "inactive",
        "queue": definition["queue"], "type": env["type"], "args": env["args"],
        "meta": env.get("meta"), "options": env.get("options"), "job_template": env,
        "created_at": iso(definition["created_at"]),
        "next_run_at": iso(schedule.next) if schedule is not None else None,
        "last_run_at": iso(occurrence_due(last)) if last else None,
    }  # fmt: skip
    return {k: v for k, v in shown.items() if v is not None}
