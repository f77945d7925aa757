"""Retention: one elected leader deletes finished jobs, old events and old ledger rows.

A queue table that only grows slows every claim and every vacuum, so the
:class:`Maintenance` service prunes on a timer. Every worker process may run
one (``Config.maintenance``, on by default); an advisory lock on
:data:`MAINTENANCE_LOCK_KEY` elects the one that prunes through the one
elector (:class:`jobrun.leadership.Elector`), as for the scheduler, so N
workers cost one pass per tick, not N.

Each tick (``Config.maintenance_every``, by default 1 minute) the leader
deletes, in this order, by the ages of ``Config.retention`` (defaults in
brackets):

* succeeded jobs finished more than ``Retention.succeeded`` ago (1 day),
* cancelled jobs finished more than ``Retention.cancelled`` ago (7 days),
* dead jobs finished more than ``Retention.dead`` ago (14 days),

  each with its events; then

* events older than ``Retention.events`` (14 days), whatever their job's
  state (a long-lived job keeps its recent history), and
* effect-ledger rows older than ``Retention.effects`` (90 days) whose job is
  gone. The ledger is what keeps a replayed idempotency key from running its
  effect twice, so it outlives the jobs; a row is never pruned while its job
  or any job of its effect key (a replay queued after a purge) exists.

Every ``rollup_every`` (10 seconds), unless ``Config.charts`` is off, the
leader also folds the outcome events written since into the dashboard
charts' rows (:class:`jobrun.rollup.Rollup`); each pass deletes those rows by the ages
of :data:`jobrun.rollup.STATS_KEPT` (a day to 8 days, by their width).

Between passes, every ``statistics_every`` (2 seconds), the leader also
analyzes any of jobrun's growing tables that holds more than twice the rows
its planner statistics describe (:meth:`jobrun.ports.Pruning.refresh_statistics`).
Sessions keep the plan they made of each prepared statement; a plan made while
a table was nearly empty reads the whole table, and keeps doing so after the
table has grown, until its statistics change. Autovacuum refreshes them within
its naptime; a server without autovacuum never would.

Every pass deletes in batches of ``batch_size`` rows, each batch its own short
transaction that skips rows someone else holds, with ``pause`` seconds between
batches: a backlog of millions drains steadily instead of holding locks or
monopolising the database the workers need. A full pass ends when a batch
comes back short. Losing leadership or a stop request ends a pass between two
batches; deleting twice is harmless anyway (a row can only go once).

This module uses the ports only: no psycopg, no SQL (import-linter checks).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from jobrun._waiting import sleep_unless
from jobrun.config import Config
from jobrun.domain import JobState
from jobrun.durations import positive_seconds
from jobrun.errors import ConfigurationError, JobrunError
from jobrun.leadership import MAINTENANCE_LOCK_KEY, Elector
from jobrun.outages import process_outages
from jobrun.ports import Locker, LockHandle, MaintenanceStore
from jobrun.retention import Retention, retention_problem
from jobrun.rollup import DEFAULT_ROLLUP_EVERY, STATS_KEPT, Rollup

__all__ = [
    "DEFAULT_BATCH_PAUSE",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_RETRY_LEADERSHIP_EVERY",
    "DEFAULT_STATISTICS_EVERY",
    "MAINTENANCE_LOCK_KEY",
    "Maintenance",
    "Pruned",
    "Retention",
    "retention_problem",
]

DEFAULT_BATCH_SIZE = 1000
"""Rows deleted by one batch (one short transaction)."""

DEFAULT_BATCH_PAUSE = timedelta(milliseconds=50)
"""How long the leader waits between two batches of one pass."""

DEFAULT_STATISTICS_EVERY = timedelta(seconds=2)
"""Time between two checks of the leader for tables that outgrew their statistics.

Short, because a burst into a queue whose workers planned their claim while it
was empty is served by claims that read the whole table until the check runs;
the check itself is one catalog read."""

DEFAULT_RETRY_LEADERSHIP_EVERY = timedelta(seconds=30)
"""Seconds between a follower's attempts to lead (each one opens a connection)."""

log = logging.getLogger(__name__)


WORKER_ROWS_KEPT = timedelta(hours=1)
"""How long the row of a worker that stopped without saying so stays, shown as gone."""


@dataclass(frozen=True)
class Pruned:
    """What one pruning pass deleted."""

    succeeded: int = 0
    """Succeeded jobs deleted (with their events)."""
    cancelled: int = 0
    """Cancelled jobs deleted (with their events)."""
    dead: int = 0
    """Dead jobs deleted (with their events)."""
    events: int = 0
    """Events deleted by their own age (besides those of the deleted jobs)."""
    effects: int = 0
    """Effect-ledger rows deleted."""
    progress: int = 0
    """Progress reports deleted (of attempts that ended)."""
    workers: int = 0
    """Rows of workers not heard from for :data:`WORKER_ROWS_KEPT`."""
    stats: int = 0
    """The charts' rows older than :data:`jobrun.rollup.STATS_KEPT` says for their width."""
    settled: int = 0
    """Waiting jobs queued or cancelled because their dependencies had ended (not
    a deletion: the dependents the completions could not release themselves)."""
    complete: bool = True
    """False when the pass stopped early (stop requested or leadership lost)."""

    @property
    def jobs(self) -> int:
        """Jobs deleted, every state together."""
        return self.succeeded + self.cancelled + self.dead

    @property
    def total(self) -> int:
        """Rows deleted, every kind together."""
        return self.jobs + self.events + self.effects


class Maintenance:
    """Prune by ``config.retention`` every ``config.maintenance_every`` while leading.

    ``config`` (:class:`~jobrun.config.Config`) owns those settings and has
    checked them; the keywords are the service's own tunings, which no
    configuration sets. While leading it also refreshes the statistics of
    tables that outgrew them, every ``statistics_every``, and rolls outcome
    events into the charts' rows every ``rollup_every``; while not, it
    stands by.

    ``run(stop)`` returns when ``stop`` is set, releasing the lock if held.
    Store and locker errors are logged and retried on the next tick, never
    raised: maintenance outlives a database restart. :meth:`prune_once` runs
    one pass without any lock (operators, tests).
    """

    def __init__(
        self,
        store: MaintenanceStore,
        locker: Locker,
        config: Config,
        *,
        key: int = MAINTENANCE_LOCK_KEY,
        batch_size: int = DEFAULT_BATCH_SIZE,
        pause: timedelta = DEFAULT_BATCH_PAUSE,
        retry_leadership_every: timedelta = DEFAULT_RETRY_LEADERSHIP_EVERY,
        statistics_every: timedelta = DEFAULT_STATISTICS_EVERY,
        rollup_every: timedelta = DEFAULT_ROLLUP_EVERY,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be at least 1, got {batch_size}")
        self._store = store
        self._retention = config.retention
        self._every = config.maintenance_every.total_seconds()
        self._batch = batch_size
        # Where the next settling of waiting jobs starts (created_at, id); None: the start.
        self._settle_after: tuple[datetime, UUID] | None = None
        self._pause = positive_seconds("pause", pause, allow_zero=True)
        self._retry = positive_seconds("retry_leadership_every", retry_leadership_every)
        self._statistics_every = positive_seconds("statistics_every", statistics_every)
        self._rollup_every = positive_seconds("rollup_every", rollup_every)
        self._rollup = Rollup(store)
        self._charts = config.charts
        self._analyzed: list[str] = []
        self._elector = Elector(locker, key, name="maintenance", retry_every=self._retry)
        self._passes = 0
        self._deleted = 0

    @property
    def retention(self) -> Retention:
        """The ages this service prunes by."""
        return self._retention

    @property
    def is_leader(self) -> bool:
        """Whether this service holds the maintenance lock right now."""
        return self._elector.is_leader

    @property
    def passes(self) -> int:
        """Pruning passes this service has started while leading (finished, cut short or failed)."""
        return self._passes

    @property
    def deleted(self) -> int:
        """Rows this service has deleted since it started, every kind together."""
        return self._deleted

    @property
    def analyzed(self) -> list[str]:
        """Tables this service has analyzed because they outgrew their statistics, in order."""
        return list(self._analyzed)

    async def run(self, stop: asyncio.Event) -> None:
        """Compete for leadership and prune on schedule while leading, until ``stop``."""
        await self._elector.run(stop, self._lead)

    async def prune_once(
        self,
        now: datetime | None = None,
        *,
        stop: asyncio.Event | None = None,
        handle: LockHandle | None = None,
    ) -> Pruned:
        """Run one pass: every kind of row, in bounded batches; return what it deleted.

        Ages are measured from database now, or from ``now`` (pinned, for
        tests). The pass ends early, between two batches, when ``stop`` is set
        or ``handle`` is lost. Store errors are raised.
        """
        r = self._retention
        counts: dict[str, int] = {}
        complete = True
        steps: list[tuple[str, Callable[[], Awaitable[int]]]] = [
            (state.value, self._job_batch(state, age, now)) for state, age in r.job_ages()
        ]
        steps.append(
            ("events", lambda: self._store.prune_events_batch(r.events, self._batch, now=now))
        )
        steps.append(
            ("effects", lambda: self._store.prune_effects_batch(r.effects, self._batch, now=now))
        )
        steps.append(("progress", lambda: self._store.prune_progress_batch(self._batch)))
        steps.append(("workers", lambda: self._store.prune_workers(WORKER_ROWS_KEPT)))
        steps += [
            ("stats", self._stats_batch(width, age)) for width, age in sorted(STATS_KEPT.items())
        ]
        for name, batch in steps:
            done, deleted = await self._drain(batch, stop, handle)
            counts[name] = counts.get(name, 0) + deleted  # "stats" is one step per width
            self._deleted += deleted
            if not done:
                complete = False
                break
        if complete:
            complete, counts["settled"] = await self._settle(stop, handle)
        return Pruned(
            succeeded=counts.get("succeeded", 0),
            cancelled=counts.get("cancelled", 0),
            dead=counts.get("dead", 0),
            events=counts.get("events", 0),
            effects=counts.get("effects", 0),
            progress=counts.get("progress", 0),
            workers=counts.get("workers", 0),
            stats=counts.get("stats", 0),
            settled=counts.get("settled", 0),
            complete=complete,
        )

    def _stats_batch(self, width: int, age: timedelta) -> Callable[[], Awaitable[int]]:
        return lambda: self._store.prune_stats_batch(width, age, self._batch)

    def _job_batch(
        self, state: JobState, age: timedelta, now: datetime | None
    ) -> Callable[[], Awaitable[int]]:
        return lambda: self._store.purge_finished_batch(state, age, self._batch, now=now)

    async def _settle(
        self, stop: asyncio.Event | None, handle: LockHandle | None
    ) -> tuple[bool, int]:
        """Settle waiting jobs from where the last pass stopped to the end, then admit
        the jobs waiting for a concurrency key's slot; (finished, settled)."""
        total = 0
        while True:
            settled, self._settle_after = await self._store.settle_waiting(
                self._settle_after, self._batch
            )
            total += settled
            if self._settle_after is None:
                # And the jobs waiting for a slot of their concurrency key.
                return True, total + await self._store.settle_concurrency(self._batch)
            if self._pause > 0:
                await sleep_unless(stop, self._pause, handle)
            if (stop is not None and stop.is_set()) or (handle is not None and handle.lost):
                return False, total

    async def _drain(
        self,
        batch: Callable[[], Awaitable[int]],
        stop: asyncio.Event | None,
        handle: LockHandle | None,
    ) -> tuple[bool, int]:
        """Run ``batch`` until one comes back short; (finished, rows deleted)."""
        total = 0
        while True:
            deleted = await batch()
            total += deleted
            if deleted < self._batch:
                return True, total
            if self._pause > 0:
                await sleep_unless(stop, self._pause, handle)
            if (stop is not None and stop.is_set()) or (handle is not None and handle.lost):
                return False, total

    @property
    def rollup(self) -> Rollup:
        """The charts' roll-up this service turns while leading."""
        return self._rollup

    async def _lead(self, handle: LockHandle, stop: asyncio.Event) -> None:
        prune_at = roll_at = time.monotonic()
        while not stop.is_set() and not handle.lost:
            if self._charts and time.monotonic() >= roll_at:
                await self._roll_up(handle, stop)
                roll_at = time.monotonic() + self._rollup_every
            if time.monotonic() >= prune_at:
                await self._pass(handle, stop)
                prune_at = time.monotonic() + self._every
            await self._refresh_statistics()
            wait = min(
                self._statistics_every, prune_at - time.monotonic(), roll_at - time.monotonic()
            )
            await sleep_unless(stop, max(0.0, wait), handle)

    async def _roll_up(self, handle: LockHandle, stop: asyncio.Event) -> None:
        try:
            await self._rollup.tick(stop, handle)
        except (JobrunError, OSError) as exc:
            process_outages().log_failure(
                log, exc, "maintenance: rolling up the charts' statistics failed: %s", exc
            )

    async def _refresh_statistics(self) -> None:
        try:
            tables = await self._store.refresh_statistics()
        except (JobrunError, OSError) as exc:
            process_outages().log_failure(
                log, exc, "maintenance: refreshing planner statistics failed: %s", exc
            )
            return
        if tables:
            self._analyzed += tables
            log.info(
                "maintenance: analyzed %s (more than twice the rows "
                "their planner statistics describe)",
                ", ".join(tables),
            )

    async def _pass(self, handle: LockHandle, stop: asyncio.Event) -> None:
        try:
            pruned = await self.prune_once(stop=stop, handle=handle)
        except (JobrunError, OSError) as exc:
            process_outages().log_failure(log, exc, "maintenance: pruning failed: %s", exc)
            return
        finally:
            self._passes += 1
        if pruned.total:
            log.info(
                "maintenance: deleted %d succeeded, %d cancelled, %d dead job(s), "
                "%d event(s), %d ledger row(s)%s",
                pruned.succeeded,
                pruned.cancelled,
                pruned.dead,
                pruned.events,
                pruned.effects,
                "" if pruned.complete else " (pass cut short)",
            )
