"""Dead letters: the store a dead letter queue keeps them in, and inspection, search, replay,
purge and statistics over it. Every operation on one queue is a method of ``Queue``::

    dlq = Queue("payments-dlq")
    print(await dlq.get_dead_letter_count())
    page = await dlq.search_dead_letters(DeadLetterFilter(error_type="TimeoutError"))
    await dlq.replay_all_dead_letters(DeadLetterFilter(error_type="TimeoutError"), rate=200)

:class:`DeadLetterView` looks at every dead letter queue of a prefix at once.

Modules: ``filters`` (what to match), ``store`` (counts and indexes read directly),
``search`` (bounded walks and cursors), ``replay`` (moving given dead letters), ``bulk``
(cursor-driven bulk operations), ``stats``, ``lifecycle`` (statuses, their checks and
settling), ``retention`` (policies and pruning), ``health`` (measures from counters and
indexes), ``leadership`` and ``pruner`` (one process at a time for periodic duties), ``view``
(all queues), and the methods of ``Queue``: ``mixin`` (inspection and search), ``moves``
(replay and purge), ``actions`` (status changes) and ``upkeep`` (retention and health).
"""

from ..errors import ErrorCode
from .bulk import Progress
from .filters import DeadLetterFilter, DeadLetterStatus
from .health import DeadLetterHealth
from .mixin import DeadLetterMixin
from .retention import RetentionPolicy, StatusRetention
from .search import DeadLetterPage
from .stats import DeadLetterCounters, DeadLetterStats
from .store import DeadLetterQueueOptions
from .view import DeadLetterView

__all__ = [
    "DeadLetterCounters",
    "DeadLetterFilter",
    "DeadLetterHealth",
    "DeadLetterMixin",
    "DeadLetterPage",
    "DeadLetterQueueOptions",
    "DeadLetterStats",
    "DeadLetterStatus",
    "DeadLetterView",
    "ErrorCode",
    "Progress",
    "RetentionPolicy",
    "StatusRetention",
]
