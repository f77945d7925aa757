"""The one elector: run a body while holding a leader lock, for every leader-run service.

The scheduler, retention (:class:`~jobrun.maintenance.Maintenance`) and the
queue gauges (:class:`~jobrun.telemetry.prometheus.QueueStatsPublisher`) each want exactly
one process of a fleet doing their work. They share this loop instead of each
writing its own, so acquiring, keeping, losing and releasing leadership behave
and log the same way everywhere:

- a follower tries the advisory lock every ``retry_every`` seconds; the server
  frees a lock the moment its holder's connection dies, so a follower leads
  within one retry period of a leader's death;
- the leader runs its body, which returns when ``stop`` is set or the lock
  handle reports the lock lost (the body waits with
  :func:`~jobrun._waiting.sleep_unless` on the handle);
- a leader that lost its lock sits out two retry periods, so leadership moves
  to a healthy follower instead of flapping back to the process whose
  connection just failed;
- locker errors (the database restarting, a dropped connection) are logged
  and retried, never raised: a leader-run service outlives a database restart.

Each service's lock key is declared once, in :data:`LEADER_LOCK_KEYS`; a test
checks that no two keys (the migration runner's included) are equal.

This module uses the ports only: no psycopg, no SQL (import-linter checks).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import Final

from jobrun._waiting import sleep_unless
from jobrun.errors import JobrunError
from jobrun.outages import process_outages
from jobrun.ports import Locker, LockHandle

__all__ = [
    "LEADER_LOCK_KEYS",
    "MAINTENANCE_LOCK_KEY",
    "QUEUE_STATS_LOCK_KEY",
    "SCHEDULER_LOCK_KEY",
    "Elector",
    "LeaderBody",
]

SCHEDULER_LOCK_KEY: Final = 0x6A6F6272756E0001
"""The advisory lock key every jobrun scheduler competes for ("jobrun" then 1)."""

MAINTENANCE_LOCK_KEY: Final = 0x6A6F6272756E0002
"""The advisory lock key of the retention service ("jobrun" then 2)."""

QUEUE_STATS_LOCK_KEY: Final = 0x6A6F6272756E0003
"""The advisory lock key of the queue gauges' publisher ("jobrun" then 3)."""

LEADER_LOCK_KEYS: Final = MappingProxyType(
    {
        "scheduler": SCHEDULER_LOCK_KEY,
        "maintenance": MAINTENANCE_LOCK_KEY,
        "queue stats": QUEUE_STATS_LOCK_KEY,
    }
)
"""Every leader-run service's lock key, by the name its log lines use."""

LeaderBody = Callable[[LockHandle, asyncio.Event], Awaitable[None]]
"""A service's work while it leads: returns once ``stop`` is set or the handle is lost."""

log = logging.getLogger(__name__)


class Elector:
    """Competes for one advisory lock and runs a body while holding it.

    ``name`` prefixes every log line (``"scheduler: leading (lock key …)"``).
    :attr:`is_leader` is true while the lock is held and not known lost.
    """

    def __init__(self, locker: Locker, key: int, *, name: str, retry_every: float) -> None:
        self._locker = locker
        self._key = key
        self._name = name
        self._retry = retry_every
        self._handle: LockHandle | None = None
        self._attempts = 0

    @property
    def key(self) -> int:
        """The advisory lock key this elector competes for."""
        return self._key

    @property
    def retry_every(self) -> float:
        """Seconds between a follower's attempts: the failover bound."""
        return self._retry

    @property
    def is_leader(self) -> bool:
        """Whether this elector holds its lock right now."""
        return self._handle is not None and not self._handle.lost

    @property
    def attempts(self) -> int:
        """How many tries for the lock have had their answer (won, refused or failed).

        A test waits on it to know a follower has tried again, instead of
        sleeping a retry period.
        """
        return self._attempts

    async def run(self, stop: asyncio.Event, body: LeaderBody) -> None:
        """Compete for the lock and run ``body`` while leading, until ``stop`` is set.

        The lock is released whenever ``body`` returns or raises; a release
        that fails (the connection is already gone) is ignored, since the
        server frees the lock with the connection anyway.
        """
        while not stop.is_set():
            handle = await self._try_lead()
            if handle is None:
                await sleep_unless(stop, self._retry)
                continue
            self._handle = handle
            log.info("%s: leading (lock key %d)", self._name, self._key)
            try:
                await body(handle, stop)
            finally:
                self._handle = None
                lost = handle.lost
                with contextlib.suppress(JobrunError, OSError):
                    await handle.release()
            if lost:
                # During an outage the loss follows from it: said, not warned of again.
                level = logging.INFO if process_outages().down else logging.WARNING
                log.log(level, "%s: lost leadership; standing by", self._name)
                await sleep_unless(stop, 2 * self._retry)
            else:
                log.info("%s: stepped down", self._name)

    async def _try_lead(self) -> LockHandle | None:
        try:
            return await self._locker.try_acquire(self._key)
        except (JobrunError, OSError) as exc:
            process_outages().log_failure(
                log, exc, "%s: cannot try for leadership: %s", self._name, exc
            )
            return None
        finally:
            self._attempts += 1
