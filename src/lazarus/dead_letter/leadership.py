"""One process at a time for a periodic duty of a dead letter queue (pruning): an expiring
lease key. Whoever holds it renews it each round; when its holder dies, the lease expires and
another process (a redriver, or a worker when no redriver runs) takes over."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _scripts

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys


async def acquire(client: Client, keys: QueueKeys, role: str, holder: str, lease_ms: int) -> bool:
    """Whether ``holder`` leads ``role`` for the next ``lease_ms`` (taken or renewed)."""
    script = _scripts.load("acquire_lease")
    return bool(await script(client, [keys.dl_leader(role)], [holder, lease_ms]))


async def release(client: Client, keys: QueueKeys, role: str, holder: str) -> None:
    """Give the lease up if ``holder`` holds it, so another process need not wait for it to
    expire."""
    key = keys.dl_leader(role)
    if await client.get(key) in (holder, holder.encode()):
        await client.delete(key)
