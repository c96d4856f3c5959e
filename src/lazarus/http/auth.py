"""Who may do what: named credentials with roles, and the throttle on failed sign-ins.

A credential is a token with a name and a role. Roles are ordered — each may do what the one
before it may:

- ``viewer`` reads queues, jobs and dead letters; payloads and return values are masked
  unless the credential was given ``payloads`` (``name:viewer+payloads:token``);
- ``operator`` also replays, purges, archives, changes statuses, pauses queues and sets
  their limits;
- ``admin`` also sets policies, rules and webhooks, and reads the audit trail.

Tokens are compared in constant time against a SHA-256 digest of each configured token, so a
token of any length or alphabet is checked the same way and can never raise.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import hashlib
import hmac
import re
import time
from collections.abc import Iterable

_UNSAFE_NAME = re.compile(r"[\s,\x00-\x1f\x7f-\x9f]+")

MIN_TOKEN_LENGTH = 16
"""The shortest token accepted in configuration: guessing must be hopeless."""


class Role(enum.IntEnum):
    """What a credential may do; a higher role may do everything a lower one may."""

    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    def __str__(self) -> str:
        return self.name.lower()


@dataclasses.dataclass(frozen=True)
class Principal:
    """Who made a request: the credential's name and role. ``payloads`` says whether it may
    read job payloads and return values (always true from ``operator`` up)."""

    name: str
    role: Role
    payloads: bool = True

    def may(self, role: Role) -> bool:
        """Whether this principal has ``role`` or a higher one."""
        return self.role >= role

    def actor(self, claimed: str | None = None, default: str = "api") -> str:
        """The actor a timeline records for this principal: ``operator:<its name>``; when
        authentication is off (:data:`ANONYMOUS`), the name the request ``claimed`` (cleaned
        of whitespace, commas and control characters), else ``default``."""
        if self.name != "anonymous":
            return f"operator:{self.name}"
        name = _UNSAFE_NAME.sub("-", (claimed or "").strip())[:100] or default
        return f"operator:{name}"


ANONYMOUS = Principal("anonymous", Role.ADMIN)
"""The principal of every request when the server runs with authentication off."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class Credentials:
    """The configured tokens. Build with :meth:`parse` (``name:role:token`` entries) or
    :meth:`single` (one token with every right)."""

    def __init__(self, entries: Iterable[tuple[str, Principal]] = ()) -> None:
        self._by_digest: list[tuple[bytes, Principal]] = []
        names: set[str] = set()
        for token, principal in entries:
            if len(token) < MIN_TOKEN_LENGTH:
                raise ValueError(
                    f"token of {principal.name!r}: at least {MIN_TOKEN_LENGTH} characters "
                    f"are required, got {len(token)}"
                )
            if principal.name in names:
                raise ValueError(f"token names must be unique: {principal.name!r} repeats")
            names.add(principal.name)
            self._by_digest.append((_digest(token), principal))

    @classmethod
    def single(cls, token: str) -> Credentials:
        """One token, named ``token``, with every right."""
        return cls([(token, Principal("token", Role.ADMIN))])

    @classmethod
    def parse(cls, text: str) -> Credentials:
        """Entries ``name:role:token`` separated by commas or new lines (``#`` starts a
        comment line); ``role`` is ``viewer``, ``viewer+payloads``, ``operator`` or ``admin``.
        Raises ``ValueError`` naming the bad entry by its position and name."""
        entries = []
        lines = [part.strip() for line in text.splitlines() for part in line.split(",")]
        for number, line in enumerate((x for x in lines if x and not x.startswith("#")), 1):
            name, _, rest = line.partition(":")
            role_text, _, token = rest.partition(":")
            if not name or not role_text or not token:
                raise ValueError(f"token entry {number}: expected 'name:role:token'")
            role_name, _, extra = role_text.partition("+")
            try:
                role = Role[role_name.strip().upper()]
            except KeyError:
                raise ValueError(
                    f"token entry {number} ({name!r}): unknown role {role_name!r}; "
                    "expected viewer, viewer+payloads, operator or admin"
                ) from None
            if extra not in ("", "payloads"):
                raise ValueError(f"token entry {number} ({name!r}): unknown flag {extra!r}")
            principal = Principal(name.strip(), role, role > Role.VIEWER or extra == "payloads")
            entries.append((token.strip(), principal))
        return cls(entries)

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    def __len__(self) -> int:
        return len(self._by_digest)

    def named(self, name: str) -> Principal | None:
        """The principal called ``name``, if it is still configured."""
        return next((p for _, p in self._by_digest if p.name == name), None)

    def authenticate(self, presented: str | None) -> Principal | None:
        """The principal whose token is ``presented``, else ``None``. Every configured token
        is compared, in constant time, whatever matches."""
        if presented is None:
            return None
        digest = _digest(presented)
        found = None
        for known, principal in self._by_digest:
            if hmac.compare_digest(known, digest):
                found = principal
        return found


class Throttle:
    """Failed sign-ins per client address: past ``limit`` failures within ``window`` seconds,
    further attempts from that address are refused until the window has passed."""

    def __init__(self, limit: int = 10, window: float = 60.0, max_clients: int = 10_000) -> None:
        self.limit = limit
        self.window = window
        self.max_clients = max_clients
        self._failures: collections.OrderedDict[str, list[float]] = collections.OrderedDict()

    def _recent(self, client: str, now: float) -> list[float]:
        times = [t for t in self._failures.get(client, []) if now - t < self.window]
        if times:
            self._failures[client] = times
            self._failures.move_to_end(client)
        else:
            self._failures.pop(client, None)
        return times

    def retry_after(self, client: str) -> int:
        """Seconds until ``client`` may try again; 0 when it may now."""
        now = time.monotonic()
        times = self._recent(client, now)
        if len(times) < self.limit:
            return 0
        return max(1, int(self.window - (now - times[0])) + 1)

    def failed(self, client: str) -> None:
        """Record a failed attempt by ``client``."""
        now = time.monotonic()
        times = self._recent(client, now)
        times.append(now)
        self._failures[client] = times
        self._failures.move_to_end(client)
        while len(self._failures) > self.max_clients:
            self._failures.popitem(last=False)
