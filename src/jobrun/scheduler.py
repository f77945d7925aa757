"""Fire schedules from exactly one process: an elected leader that ticks.

Every process may run a :class:`Scheduler`; one of them leads. Leadership is
an advisory lock taken through the :class:`~jobrun.ports.Locker` port by the
one elector, :class:`jobrun.leadership.Elector`. The
leader calls :meth:`~jobrun.ports.ScheduleStore.due_schedules` once per tick with
the database clock; the store materialises each due run as a job keyed
``sched:<id>:<next_run>`` and advances the schedule (and applies the misfire
policy: after downtime a schedule fires once, not once per missed run).

Failover. A follower retries the lock every ``retry_leadership_every``
seconds (N, default 5). When the leader's lock connection dies (its process
crashed or was killed, the network dropped, the backend was terminated) the
server frees the lock at once, so a follower leads within N seconds (plus
one connect and round trip) and materialises its first due runs at once,
at most N + ``tick`` seconds after the old leader's last tick. The old
leader notices the loss within its locker's probe interval (1 s for
:class:`jobrun.postgres.lock.AdvisoryLocker`) and then sits out 2N seconds,
so leadership moves to a healthy follower instead of flapping back. If the
old leader ticks once more before it notices, the store's row locks and the
``sched:`` idempotency key still keep every run single.

Periodic jobs declared in code. Before each materialisation the leader asks
the store for each group's current version of its declarations and writes
the ones it has not written yet (:meth:`~jobrun.ports.ScheduleStore.apply_declarations`);
a new leader writes them all once. :class:`DeclarationRenewal` is the other
half, run by every worker whose registry declares periodic jobs: it keeps
that version recorded as running. The rule they follow, and why it never
fires a slot twice across a rolling deploy, is :mod:`jobrun.periodic`'s.

This module uses the ports only: no psycopg, no SQL (import-linter checks).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from jobrun._waiting import sleep_unless
from jobrun.domain import DeclaredSet, Reconciliation
from jobrun.durations import positive_seconds
from jobrun.errors import JobrunError
from jobrun.leadership import SCHEDULER_LOCK_KEY, Elector
from jobrun.outages import process_outages
from jobrun.periodic import LAPSE_AFTER
from jobrun.ports import Locker, LockHandle, ScheduleStore

__all__ = [
    "DEFAULT_RETRY_LEADERSHIP_EVERY",
    "DEFAULT_TICK",
    "SCHEDULER_LOCK_KEY",
    "DeclarationRenewal",
    "Scheduler",
]

DEFAULT_TICK = timedelta(seconds=1)
"""The time between two materialisations by the leader."""

DEFAULT_RETRY_LEADERSHIP_EVERY = timedelta(seconds=5)
"""The time between a follower's attempts to take the lock: the failover bound."""

log = logging.getLogger(__name__)


class Scheduler:
    """Materialise due schedules while leading; stand by and retry while not.

    ``run(stop)`` returns when ``stop`` is set, releasing the lock if held.
    Store and locker errors are logged and retried, never raised: a
    scheduler outlives a database restart.
    """

    def __init__(
        self,
        store: ScheduleStore,
        locker: Locker,
        *,
        key: int = SCHEDULER_LOCK_KEY,
        tick: timedelta = DEFAULT_TICK,
        retry_leadership_every: timedelta = DEFAULT_RETRY_LEADERSHIP_EVERY,
    ) -> None:
        self._tick = positive_seconds("tick", tick)
        self._retry = positive_seconds("retry_leadership_every", retry_leadership_every)
        self._store = store
        self._elector = Elector(locker, key, name="scheduler", retry_every=self._retry)
        self._materialised = 0
        self._written: dict[str, str] = {}

    @property
    def is_leader(self) -> bool:
        """Whether this scheduler holds the lock right now."""
        return self._elector.is_leader

    @property
    def failover_bound(self) -> float:
        """Seconds after the leader's lock connection dies by which a follower leads.

        One retry period; add a connect and a round trip to the database.
        """
        return self._retry

    @property
    def leadership_attempts(self) -> int:
        """How many tries for the lock this scheduler has had answered, won or not.

        A test waits on it to know a follower has tried again (a signal, not a
        clock: see ``attempts`` of :class:`jobrun.leadership.Elector`).
        """
        return self._elector.attempts

    @property
    def materialised(self) -> int:
        """How many jobs this scheduler has materialised since it started."""
        return self._materialised

    async def run(self, stop: asyncio.Event) -> None:
        """Compete for leadership and tick while leading, until ``stop`` is set."""
        await self._elector.run(stop, self._lead)

    @property
    def declarations_written(self) -> dict[str, str]:
        """The version (digest) of each group's declarations this leader last wrote."""
        return dict(self._written)

    async def _lead(self, handle: LockHandle, stop: asyncio.Event) -> None:
        self._written.clear()  # a new leader writes every group's current version once
        while not stop.is_set() and not handle.lost:
            await self._write_declarations()
            await self._materialise()
            await sleep_unless(stop, self._tick, handle)

    async def _write_declarations(self) -> None:
        try:
            current = await self._store.current_declarations()
            for group, digest in sorted(current.items()):
                if self._written.get(group) == digest:
                    continue
                done = await self._store.apply_declarations(group, digest)
                self._written[group] = digest
                if done is not None:
                    _log_reconciliation(done)
        except (JobrunError, OSError, ValueError) as exc:
            # ValueError: declarations this version of jobrun cannot read back.
            process_outages().log_failure(
                log, exc, "scheduler: writing the schedules declared in code failed: %s", exc
            )

    async def _materialise(self) -> None:
        try:
            now = await self._store.now()
            jobs = await self._store.due_schedules(now)
        except (JobrunError, OSError) as exc:
            process_outages().log_failure(
                log, exc, "scheduler: materialising due schedules failed: %s", exc
            )
            return
        self._materialised += len(jobs)
        for job in jobs:
            log.info("scheduler: enqueued %s job %s (%s)", job.type, job.id, job.idempotency_key)


def _log_reconciliation(done: Reconciliation) -> None:
    parts = []
    created = [w.schedule.name for w in done.writes if w.create]
    updated = [w.schedule.name for w in done.writes if not w.create]
    if created:
        parts.append(f"created {', '.join(created)}")
    if updated:
        parts.append(f"updated {', '.join(updated)}")
    if done.removed:
        parts.append(f"paused as removed from code {', '.join(done.removed)}")
    log.info(
        "scheduler: schedules declared in code, group %s, version %s: %s",
        done.group,
        done.digest[:12],
        "; ".join(parts) or "already up to date",
    )
    for name, owner in done.left_alone:
        log.warning(
            "scheduler: periodic job %r of group %s not written: a schedule of that name "
            "exists, %s",
            name,
            done.group,
            owner,
        )


class DeclarationRenewal:
    """Keep a registry's declared periodic jobs recorded as running, while a worker runs.

    Every ``every`` it renews ``declared`` in the store, live for
    ``LAPSE_AFTER`` times ``every``; the scheduler's leader writes each
    group's newest live version (:mod:`jobrun.periodic`). Store errors are
    logged and retried, never raised.
    """

    def __init__(self, store: ScheduleStore, declared: DeclaredSet, every: timedelta) -> None:
        self._seconds = positive_seconds("periodic_renew", every)
        self._store = store
        self._declared = declared
        self._every = every
        self._renewals = 0

    @property
    def renewals(self) -> int:
        """How many renewals have succeeded."""
        return self._renewals

    async def run(self, stop: asyncio.Event) -> None:
        """Renew now and every ``every`` until ``stop`` is set."""
        declared = self._declared
        log.info(
            "periodic: %d periodic job(s) declared in group %s (version %s)",
            len(declared.schedules),
            declared.group,
            declared.digest[:12],
        )
        while not stop.is_set():
            try:
                await self._store.renew_declarations(declared, self._every * LAPSE_AFTER)
                self._renewals += 1
            except (JobrunError, OSError) as exc:
                process_outages().log_failure(
                    log, exc, "periodic: renewing the declared periodic jobs failed: %s", exc
                )
            await sleep_unless(stop, self._seconds)


async def declare_now(
    store: ScheduleStore, declared: DeclaredSet, every: timedelta
) -> Reconciliation | None:
    """Record ``declared`` as running (live ``LAPSE_AFTER`` times ``every``) and write its
    group's current version now, as the scheduler's leader would at its next tick.

    By the rule of :mod:`jobrun.periodic`, the version written is the group's
    newest live one, which need not be ``declared``. Returns what was written
    (None when the store knows no such version).
    """
    await store.renew_declarations(declared, every * LAPSE_AFTER)
    current = (await store.current_declarations()).get(declared.group, declared.digest)
    return await store.apply_declarations(declared.group, current)
