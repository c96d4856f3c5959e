"""message-forward: a service that queues messages from a listener for a forwarder.

A producer (``POST /messages`` and :class:`Producer`) puts :class:`ForwardJob` payloads on
the ``message-forward`` queue; a consumer logs each one (the forwarding itself comes later);
jobs that fail 3 attempts (5 s, then 10 s apart) move to ``message-forward-dlq``; ``/health``
reports Redis and the queue's statistics; the lazarus dashboard is at ``/dashboard``.

Run it with ``python -m examples.message_forward`` (see README.md beside this file).
"""

from __future__ import annotations

from .payload import ForwardJob, MediaItem
from .producer import Producer
from .service import Service
from .settings import Settings

__all__ = ["ForwardJob", "MediaItem", "Producer", "Service", "Settings"]
