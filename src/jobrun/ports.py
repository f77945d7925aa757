"""The ports: what the runtime needs from storage, one small Protocol per consumer.

The worker, the reaper, the scheduler, the CLI and a producing service each
depend on the few operations they use, never on PostgreSQL:

* :class:`Producer`: enqueue jobs (a web request, an import, a schedule).
* :class:`Executor`: claim jobs, keep their leases, record how each attempt
  ended (the worker and its completer).
* :class:`Reaping`: requeue jobs whose lease ran out (the reaper).
* :class:`Admin`: inspect and steer jobs and queues (operators, the CLI).
* :class:`Pruning`: delete what retention says is old, one bounded batch per
  call, and refresh the statistics of tables that outgrew them (the
  maintenance service).
* :class:`ScheduleStore`: create and fire schedules (the scheduler, operators).
* :class:`StatsRollup`: fold outcome events into the charts' rows
  (the maintenance leader); :class:`StatsReader`: read them (the dashboard).
* :class:`Dispatcher`: wake idle workers early (LISTEN/NOTIFY; polling is the
  guarantee); a :class:`HandoffReceiver` also delivers jobs an enqueue leased
  straight to an idle worker.
* :class:`Locker` / :class:`LockHandle`: elect one leader (the scheduler, the
  maintenance service).
* :class:`Presence`: a worker's row among the live workers.

:class:`Store` is all of the storage ports together, which is what
:class:`jobrun.postgres.Store` implements. The lease fence: the owner, the
attempt the job was claimed as, and the lease's expiry, all three; heartbeat
and every recorded outcome act only while it holds, and otherwise raise
:class:`~jobrun.errors.LeaseLost` (or leave the job out of heartbeat's
result) and change nothing. An expired lease is lost even before the reaper
has seen it, so nothing can finish a job the reaper may hand to someone else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, Unpack, runtime_checkable
from uuid import UUID

from jobrun.domain import (
    SEARCH_ROWS,
    CommitCallback,
    DeclaredSet,
    Dependency,
    Event,
    HandoffOffer,
    Job,
    JobFilter,
    JobOptions,
    JobPage,
    JobProgress,
    NewJob,
    NewSchedule,
    Outcome,
    QueueControls,
    QueueDepth,
    QueueInfo,
    QueueStats,
    Reconciliation,
    Schedule,
    SchedulePatch,
    StateCounts,
    StoredResult,
    WorkerInfo,
    WorkerReport,
    Workflow,
)
from jobrun.errors import IdempotencyConflict
from jobrun.upkeep_ports import MaintenanceStore, Pruning, StatsReader, StatsRollup
from jobrun.wakeup_ports import Dispatcher, HandoffInbox, HandoffReceiver

__all__ = [
    "Admin",
    "Dispatcher",
    "Executor",
    "HandoffInbox",
    "HandoffReceiver",
    "LockHandle",
    "Locker",
    "MaintenanceStore",
    "Presence",
    "Producer",
    "Pruning",
    "Reaping",
    "ScheduleStore",
    "StatsReader",
    "StatsRollup",
    "Store",
    "WorkerStore",
]


@runtime_checkable
class Producer(Protocol):
    """Enqueueing: what a producing service needs."""

    async def now(self) -> datetime:
        """The database clock, in UTC."""
        ...

    async def enqueue(self, job: NewJob, *, conn: Any | None = None) -> Job:
        """Insert a job, or return the stored one on an idempotent replay."""
        ...

    async def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: Any | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Insert many jobs in one transaction; one result per input, in order.

        A keyed job whose key exists with the same body yields the stored job;
        with a different body, an IdempotencyConflict in its slot.
        """
        ...

    async def enqueue_many(
        self,
        job_type: str,
        payloads: Iterable[Any],
        *,
        conn: Any | None = None,
        **options: Unpack[JobOptions],
    ) -> list[UUID]:
        """Insert one job of ``job_type`` per payload, alike in all else; their ids, in order."""
        ...


@runtime_checkable
class Executor(Protocol):
    """Claiming, leasing and recording outcomes: what a worker needs."""

    async def claim(
        self,
        queues: Sequence[str],
        owner: str,
        limit: int,
        lease: timedelta,
        *,
        offer: HandoffOffer | None = None,
    ) -> list[Job]:
        """Lease up to ``limit`` due jobs of ``queues`` for ``owner``.

        The same call rewrites ``owner``'s handoff offers: with ``offer``, the
        slots it leaves free are offered (see :class:`~jobrun.domain.HandoffOffer`);
        without, they are withdrawn.
        """
        ...

    async def retract_offers(self, owner: str) -> int:
        """Withdraw ``owner``'s handoff offers (a stopping worker); return how many."""
        ...

    async def heartbeat(
        self,
        owner: str,
        jobs: Sequence[Job],
        lease: timedelta,
        *,
        progress: Sequence[tuple[Job, float, str]] = (),
    ) -> set[UUID]:
        """Extend live leases on ``jobs`` to database now + ``lease``; return the ids kept.

        ``progress`` is the latest report ``(job, fraction, message)`` of the
        jobs whose handlers reported one, written for those still held.
        """
        ...

    async def record_outcomes(
        self, owner: str, outcomes: Sequence[Outcome]
    ) -> list[Job | Exception]:
        """Record many attempts' outcomes in as few statements as they allow.

        One result per input, in order: the job as it was left, LeaseLost, or
        the error of a commit callback.
        """
        ...

    async def dependencies_of(
        self, job_id: UUID, *, with_results: bool = False
    ) -> list[Dependency]:
        """The jobs ``job_id`` depends on, with their states now (and results, when asked)."""
        ...


@runtime_checkable
class Reaping(Protocol):
    """Requeueing expired leases: what the reaper needs."""

    async def reap_expired(self, limit: int = 1000, *, now: datetime | None = None) -> list[Job]:
        """Requeue, kill or cancel jobs whose lease expired by database now (or ``now``)."""
        ...


@runtime_checkable
class Admin(Protocol):
    """Inspecting and steering jobs and queues: what operators and the CLI need."""

    async def get(self, job_id: UUID) -> Job:
        """One job by id."""
        ...

    async def list_jobs(
        self,
        filter: JobFilter | None = None,
        *,
        limit: int = 50,
        cursor: UUID | None = None,
        search_rows: int = SEARCH_ROWS,
    ) -> JobPage:
        """A page of jobs, newest first; a search examines at most ``search_rows`` jobs."""
        ...

    async def progress_of(self, job_ids: Sequence[UUID]) -> dict[UUID, JobProgress]:
        """The latest progress of those of ``job_ids`` that are running and reported one."""
        ...

    async def workers(self) -> list[WorkerInfo]:
        """Every worker row, alive or not yet pruned."""
        ...

    async def state_counts(self) -> StateCounts:
        """How many jobs are in each state (succeeded's estimated)."""
        ...

    async def result_of(self, job_id: UUID) -> StoredResult:
        """``job_id``'s state and, once it succeeded, its handler's result; JobNotFound."""
        ...

    async def cancel(self, job_id: UUID, *, actor: str | None = None) -> Job:
        """Cancel a queued job now, or ask a leased one to stop; ``actor`` is recorded."""
        ...

    async def retry(self, job_id: UUID, *, actor: str | None = None) -> Job:
        """Put a dead or cancelled job back in its queue, due now; ``actor`` is recorded."""
        ...

    async def run_now(self, job_id: UUID, *, actor: str | None = None) -> Job:
        """Make a queued job that is not due yet due now; ``actor`` is recorded."""
        ...

    async def delete_jobs(self, job_ids: Sequence[UUID]) -> list[UUID]:
        """Delete those of ``job_ids`` that are not running; the ids deleted."""
        ...

    async def workflow(self, job_id: UUID, *, max_steps: int = ...) -> Workflow:
        """The jobs linked to ``job_id`` by dependencies either way; JobNotFound."""
        ...

    async def purge(self, older_than: timedelta, batch_size: int = 1000) -> int:
        """Delete finished jobs older than ``older_than`` (database clock); return how many."""
        ...

    async def prune_effects(self, older_than: timedelta) -> int:
        """Delete effect-ledger rows older than ``older_than`` whose job is gone."""
        ...

    async def depth(self) -> list[QueueDepth]:
        """Job counts per queue and state."""
        ...

    async def queue_stats(self) -> list[QueueStats]:
        """Per queue: jobs queued, due, leased, and the lag of the oldest due job."""
        ...

    async def events(self, job_id: UUID) -> list[Event]:
        """A job's recorded transitions, oldest first."""
        ...

    async def list_queues(self) -> list[QueueInfo]:
        """Every queue with controls or queued or leased jobs: its controls and load."""
        ...

    async def pause_queue(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Stop every worker from claiming the queue's jobs; leased ones run on.

        ``actor`` (who asked) is stored as the queue's ``changed_by``, as by
        every queue control below.
        """
        ...

    async def resume_queue(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Let workers claim the queue's jobs again."""
        ...

    async def set_queue_limits(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        rate: tuple[int, timedelta] | None = None,
        actor: str | None = None,
        key_limit: int | None = None,
    ) -> QueueControls:
        """Cap the queue's leased jobs, its claims per interval, its jobs per key, fleet-wide."""
        ...

    async def clear_queue_limits(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Remove the queue's limits."""
        ...

    async def clear_queue(self, name: str, *, confirm: int | None, actor: str | None = None) -> int:
        """Delete the queue's queued and waiting jobs; how many. ``confirm`` must be their
        number (ConfirmationNeeded, carrying it, otherwise); running jobs are kept."""
        ...

    async def prune_events(self, older_than: timedelta) -> int:
        """Delete events older than ``older_than``; return how many."""
        ...

    async def effect_key(self, job: Job) -> tuple[str, str]:
        """The (scope, key) under which ``job``'s effect is recorded."""
        ...

    async def effect_done(self, job: Job) -> bool:
        """Whether ``job``'s effect has committed."""
        ...


@runtime_checkable
class ScheduleStore(Protocol):
    """What the scheduler and operators do with schedules: the schedules half of the store."""

    async def now(self) -> datetime:
        """The database clock, in UTC: schedules' next runs are computed from it."""
        ...

    async def create_schedule(self, schedule: NewSchedule) -> Schedule:
        """Store a new schedule; its first run is computed from database now."""
        ...

    async def update_schedule(
        self, name: str, patch: SchedulePatch, *, actor: str | None = None
    ) -> Schedule:
        """Change a schedule; a new trigger recomputes the next run; records ``actor``.

        A schedule declared in code is refused (InvalidSchedule): its
        declaration is where it changes.
        """
        ...

    async def run_schedule_now(self, name: str, *, actor: str | None = None) -> Job:
        """Enqueue one job of the schedule, due now; its next and last runs stay as they were."""
        ...

    async def pause_schedule(self, name: str, *, actor: str | None = None) -> Schedule:
        """Stop a schedule from firing until resumed; ``actor`` is stored as ``changed_by``."""
        ...

    async def resume_schedule(self, name: str, *, actor: str | None = None) -> Schedule:
        """Let a paused schedule fire again, from now on (no catch-up); records ``actor``."""
        ...

    async def delete_schedule(self, name: str) -> None:
        """Remove a schedule; jobs it already made are untouched."""
        ...

    async def list_schedules(
        self, *, after: str | None = None, limit: int | None = None
    ) -> list[Schedule]:
        """All schedules by name, or a page of ``limit`` after the name ``after``."""
        ...

    async def get_schedule(self, name: str) -> Schedule:
        """One schedule by name."""
        ...

    async def due_schedules(self, now: datetime) -> list[Job]:
        """Materialise every due run as a job and advance the schedules; return the jobs."""
        ...

    async def renew_declarations(
        self, declared: DeclaredSet, live_for: timedelta, *, now: datetime | None = None
    ) -> datetime:
        """Say a running process declares ``declared``, live ``live_for`` more; return its since."""
        ...

    async def current_declarations(self, *, now: datetime | None = None) -> dict[str, str]:
        """Each group's current version of its declarations: the digest, by group."""
        ...

    async def apply_declarations(
        self, group: str, digest: str, *, now: datetime | None = None
    ) -> Reconciliation | None:
        """Write that version of the group's declarations into the schedules; None if unknown."""
        ...


class Presence(Protocol):
    """A worker's row in the table of live workers (migration 00017)."""

    async def worker_seen(self, report: WorkerReport) -> None:
        """Write the reporting worker's row: who it is, and the jobs it runs now."""
        ...

    async def worker_gone(self, owner: str) -> None:
        """Delete ``owner``'s row: the worker stopped."""
        ...


@runtime_checkable
class WorkerStore(Executor, Reaping, Presence, Protocol):
    """What a :class:`~jobrun.worker.Worker` needs: run jobs, reap, keep its worker row."""


@runtime_checkable
class Store(
    Producer,
    Executor,
    Reaping,
    Presence,
    Admin,
    Pruning,
    ScheduleStore,
    StatsRollup,
    StatsReader,
    Protocol,
):
    """Every storage port together, with the one-outcome conveniences.

    Each mutating method is one transaction (see the module docstring for the
    lease fence). :class:`jobrun.postgres.Store` implements it.
    """

    async def complete(self, job: Job, owner: str, commit: CommitCallback | None = None) -> Job:
        """Mark a leased job done, running ``commit`` in the same transaction."""
        ...

    async def fail(self, job: Job, owner: str, error: str) -> Job:
        """Record a failed attempt: queued after the job's backoff, dead, or cancelled."""
        ...

    async def release(self, job: Job, owner: str, reason: str) -> Job:
        """Hand an unfinished job back: queued, due now, the attempt not counted."""
        ...


@runtime_checkable
class LockHandle(Protocol):
    """A held advisory lock."""

    @property
    def lost(self) -> bool:
        """True once the lock's connection is gone, so the lock may be held elsewhere."""
        ...

    async def wait_lost(self) -> None:
        """Return when the lock is lost."""
        ...

    async def release(self) -> None:
        """Give the lock up."""
        ...


@runtime_checkable
class Locker(Protocol):
    """Leader election: at most one holder per key across every process."""

    async def try_acquire(self, key: int) -> LockHandle | None:
        """Take the lock if free; ``None`` when another session holds it."""
        ...
