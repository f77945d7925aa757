"""The domain of jobrun and the ports the runtime consumes.

Everything here is plain data and Protocols: no I/O, no SQL, no psycopg. The
worker, reaper, scheduler and CLI depend only on this module; the PostgreSQL
package (:mod:`jobrun.postgres`) implements the ports. Keeping that line
sharp is what lets the contract be tested in one place.

States and transitions (every arrow is recorded in ``job_events``)::

    queued ──claim──▶ leased ──complete──▶ succeeded
      ▲                 │ │ └──complete/fail with cancel requested──▶ cancelled
      └──fail (retry)───┘ └──fail, no attempts left──▶ dead
    queued ──cancel──▶ cancelled
    dead, cancelled ──retry──▶ queued
    leased ──release (worker shutdown)──▶ queued, attempt given back
    leased ──lease expires (reaper)──▶ queued or dead

Time arguments on the ports are *database* time as read by the caller
(``await store.now()``), never the application's clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from jobrun.errors import (
    CommitTimeout,
    ConfigurationError,
    DatabaseUnavailable,
    IdempotencyConflict,
    InvalidJob,
    InvalidSchedule,
    InvalidTransition,
    JobNotFound,
    JobrunError,
    LeaseLost,
    MigrationError,
    PayloadTooLarge,
    ScheduleNotFound,
    UnknownJobType,
)

__all__ = [
    "Backoff",
    "BackoffKind",
    "CommitCallback",
    "CommitTimeout",
    "Completion",
    "ConfigurationError",
    "DatabaseUnavailable",
    "Dispatcher",
    "Event",
    "EventMode",
    "IdempotencyConflict",
    "InvalidJob",
    "InvalidSchedule",
    "InvalidTransition",
    "Job",
    "JobFilter",
    "JobNotFound",
    "JobPage",
    "JobState",
    "JobrunError",
    "LeaseLost",
    "LockHandle",
    "Locker",
    "MigrationError",
    "NewJob",
    "NewSchedule",
    "PayloadTooLarge",
    "QueueDepth",
    "Schedule",
    "ScheduleNotFound",
    "SchedulePatch",
    "Schedules",
    "Store",
    "SyncCommitCallback",
    "SyncCompletion",
    "UnknownJobType",
    "new_job_id",
]

DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 25


_last_job_id = 0


def new_job_id() -> UUID:
    """Return a UUIDv7: random, but ordered by creation time.

    Time-ordered ids keep the primary-key index append-mostly and give job
    listings a stable newest-first order for free. Within one process the ids
    are strictly increasing, even inside one millisecond.
    """
    global _last_job_id
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version 7
    value |= ((rand >> 62) & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # RFC 9562 variant
    value |= rand & ((1 << 62) - 1)  # rand_b, 62 bits
    if value <= _last_job_id:
        # Same millisecond (or a clock step back): count up in rand_b instead.
        value = _last_job_id + 1
    _last_job_id = value
    return UUID(int=value)


class JobState(StrEnum):
    """Where a job is in its life; the terminal states are final until a retry."""

    QUEUED = "queued"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    DEAD = "dead"

    @property
    def is_terminal(self) -> bool:
        """True for succeeded, cancelled and dead."""
        return self in (JobState.SUCCEEDED, JobState.CANCELLED, JobState.DEAD)


class BackoffKind(StrEnum):
    """How the wait before a retry grows with the attempt number."""

    CONSTANT = "constant"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"


class Backoff(BaseModel):
    """A job's own retry policy: wait ``base`` grown by ``kind``, never more than ``max``."""

    model_config = ConfigDict(frozen=True)

    kind: BackoffKind = BackoffKind.EXPONENTIAL
    base: timedelta = timedelta(seconds=1)
    max: timedelta = timedelta(hours=1)

    @model_validator(mode="after")
    def _check(self) -> Backoff:
        if self.base <= timedelta(0):
            raise ValueError("backoff base must be positive")
        if self.max < self.base:
            raise ValueError("backoff max must be at least base")
        return self

    def delay(self, attempt: int) -> timedelta:
        """The wait after failed attempt number ``attempt`` (1 for the first run)."""
        n = max(attempt, 1)
        if self.kind is BackoffKind.CONSTANT:
            wait = self.base
        elif self.kind is BackoffKind.LINEAR:
            wait = self.base * n
        else:
            # Cap the exponent first so a job on attempt 500 cannot overflow timedelta.
            wait = self.base * (2 ** min(n - 1, 40)) if n < 41 else self.max
        return min(wait, self.max)


DEFAULT_BACKOFF = Backoff()
"""Exponential from 1 second, capped at 1 hour: the policy of a job that names none."""


class NewJob(BaseModel):
    """A job to enqueue. ``delay`` and ``run_at`` are exclusive; both are optional."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(min_length=1, max_length=255)
    payload: JsonValue = Field(default_factory=dict)
    queue: str = Field(default=DEFAULT_QUEUE, min_length=1, max_length=128)
    priority: int = Field(default=0, ge=-32768, le=32767)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1)
    # One shared default: Backoff is frozen, and building one per job is a
    # measurable share of a 100,000-job batch.
    backoff: Backoff = Field(default=DEFAULT_BACKOFF)
    run_at: datetime | None = None
    delay: timedelta | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=512)
    id: UUID = Field(default_factory=new_job_id)

    @field_validator("run_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("run_at must be timezone-aware")
        return value

    @model_validator(mode="after")
    def _one_start(self) -> NewJob:
        if self.run_at is not None and self.delay is not None:
            raise ValueError("give run_at or delay, not both")
        if self.delay is not None and self.delay < timedelta(0):
            raise ValueError("delay must not be negative")
        return self


class Job(BaseModel):
    """A job as stored. Timestamps are UTC."""

    id: UUID
    queue: str
    type: str
    payload: JsonValue
    priority: int
    state: JobState
    attempts: int
    max_attempts: int
    backoff: Backoff
    run_at: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    cancel_requested: bool
    idempotency_key: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class Event(BaseModel):
    """One recorded transition of a job."""

    id: int
    job_id: UUID
    at: datetime
    kind: str
    from_state: JobState | None
    to_state: JobState
    attempt: int
    owner: str | None
    detail: str | None


class EventMode(StrEnum):
    """Which transitions are written to ``job_events``.

    ``all`` records every transition. ``terminal`` skips the claim events,
    the one transition that happens on every attempt of every job and says
    little that the next event does not.
    """

    ALL = "all"
    TERMINAL = "terminal"


class JobFilter(BaseModel):
    """Filters for :meth:`Store.list`; ``None`` means any."""

    queue: str | None = None
    state: JobState | None = None
    type: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


class JobPage(BaseModel):
    """One page of a listing, newest first; pass ``next_cursor`` to get the next page."""

    jobs: list[Job]
    next_cursor: UUID | None


class QueueDepth(BaseModel):
    """How many jobs one queue holds in one state."""

    queue: str
    state: JobState
    count: int
    oldest_created_at: datetime | None


class NewSchedule(BaseModel):
    """A schedule to create: a job template fired on a cron expression or a fixed interval."""

    name: str = Field(min_length=1, max_length=255)
    type: str = Field(min_length=1, max_length=255)
    payload: JsonValue = Field(default_factory=dict)
    queue: str = Field(default=DEFAULT_QUEUE, min_length=1, max_length=128)
    priority: int = Field(default=0, ge=-32768, le=32767)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"

    @model_validator(mode="after")
    def _one_trigger(self) -> NewSchedule:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of cron and every")
        if self.every is not None and self.every <= timedelta(0):
            raise ValueError("every must be positive")
        return self


class SchedulePatch(BaseModel):
    """Fields of a schedule to change; ``None`` leaves a field as it is."""

    type: str | None = None
    payload: JsonValue | None = None
    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    cron: str | None = None
    every: timedelta | None = None
    timezone: str | None = None


class Schedule(BaseModel):
    """A stored schedule."""

    id: int
    name: str
    type: str
    queue: str
    payload: JsonValue
    priority: int
    max_attempts: int
    cron: str | None
    every: timedelta | None
    timezone: str
    next_run_at: datetime
    last_run_at: datetime | None
    paused: bool
    created_at: datetime
    updated_at: datetime


CommitCallback = Callable[[Any], Awaitable[None]]
"""A handler's effect, run inside the completion transaction.

It receives the transaction's connection (a ``psycopg.AsyncConnection``) and
writes through it; those writes commit with the job's completion or not at
all. The port types it loosely so the runtime never imports psycopg.

A callback must be safe to call again: completions are committed in groups,
and when one callback of a group fails the group is rolled back and the
others are run again in a transaction without it. Their database writes
commit once, whatever happens, but any other side effect of the callback's
Python code (a log line, a counter, a call to another service) may happen
twice. Keep callbacks to database writes; do anything else in the handler.
"""


@dataclass(slots=True)
class Completion:
    """One job to complete in a group, with its optional commit callback.

    A plain dataclass, not a pydantic model: the worker builds one per job on
    the hot path, and the Job inside is already valid. The store counts in
    ``invocations`` how often it called ``commit``: more than once means a
    group commit was rolled back and the callback ran again (see
    :data:`CommitCallback`).
    """

    job: Job
    commit: CommitCallback | None = None
    invocations: int = 0


SyncCommitCallback = Callable[[Any], None]
"""A commit callback for the synchronous store (:class:`jobrun.postgres.SyncStore`).

The same contract as :data:`CommitCallback`, called with a sync
``psycopg.Connection`` and returning nothing.
"""


@dataclass(slots=True)
class SyncCompletion:
    """One job to complete in a group on the synchronous store; see :class:`Completion`."""

    job: Job
    commit: SyncCommitCallback | None = None
    invocations: int = 0


@runtime_checkable
class Schedules(Protocol):
    """The schedules half of the store."""

    async def create_schedule(self, schedule: NewSchedule) -> Schedule:
        """Store a new schedule; its first run is computed from database now."""
        ...

    async def update_schedule(self, name: str, patch: SchedulePatch) -> Schedule:
        """Change a schedule; a new trigger recomputes the next run."""
        ...

    async def pause_schedule(self, name: str) -> Schedule:
        """Stop a schedule from firing until resumed."""
        ...

    async def resume_schedule(self, name: str) -> Schedule:
        """Let a paused schedule fire again, from now on (no catch-up)."""
        ...

    async def delete_schedule(self, name: str) -> None:
        """Remove a schedule; jobs it already made are untouched."""
        ...

    async def list_schedules(self) -> list[Schedule]:
        """All schedules, by name."""
        ...

    async def get_schedule(self, name: str) -> Schedule:
        """One schedule by name."""
        ...

    async def due_schedules(self, now: datetime) -> list[Job]:
        """Materialise every due run as a job and advance the schedules; return the jobs."""
        ...


@runtime_checkable
class Store(Schedules, Protocol):
    """Durable job storage: every state transition of the contract.

    Each mutating method is one transaction. ``owner`` identifies a worker's
    lease. The lease fence is the owner, the attempt the job was claimed as,
    and the lease's expiry, all three: ``heartbeat``, ``complete``, ``fail``
    and ``release`` act only while the lease is held under the fence, and
    otherwise raise :class:`LeaseLost` (or leave the job out of ``heartbeat``'s
    result) and change nothing. An expired lease is lost even before the
    reaper has seen it, so nothing can finish a job the reaper may be about to
    give to someone else.
    """

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

    async def claim(
        self, queues: Sequence[str], owner: str, limit: int, lease: timedelta
    ) -> list[Job]:
        """Lease up to ``limit`` due jobs of ``queues`` for ``owner``."""
        ...

    async def heartbeat(self, owner: str, jobs: Sequence[Job], until: datetime) -> set[UUID]:
        """Extend live leases on ``jobs`` to ``until``; return the ids still held, not cancelled."""
        ...

    async def complete(self, job: Job, owner: str, commit: CommitCallback | None = None) -> Job:
        """Mark a leased job done, running ``commit`` in the same transaction."""
        ...

    async def complete_many(
        self, owner: str, completions: Sequence[Completion]
    ) -> list[Job | Exception]:
        """Complete many jobs in one transaction where possible; one result per input."""
        ...

    async def fail(self, job: Job, owner: str, error: str, retry_at: datetime) -> Job:
        """Record a failed attempt: queued at ``retry_at``, dead, or cancelled."""
        ...

    async def release(self, job: Job, owner: str, reason: str) -> Job:
        """Hand an unfinished job back: queued, due now, the attempt not counted."""
        ...

    async def reap_expired(self, now: datetime, limit: int = 1000) -> list[Job]:
        """Requeue (or kill) jobs whose lease expired before ``now``."""
        ...

    async def get(self, job_id: UUID) -> Job:
        """One job by id."""
        ...

    async def list_jobs(
        self, filter: JobFilter | None = None, *, limit: int = 50, cursor: UUID | None = None
    ) -> JobPage:
        """A page of jobs, newest first."""
        ...

    async def cancel(self, job_id: UUID) -> Job:
        """Cancel a queued job now, or ask a leased one to stop."""
        ...

    async def retry(self, job_id: UUID) -> Job:
        """Put a dead or cancelled job back in its queue, due now."""
        ...

    async def purge(self, older_than: timedelta, batch_size: int = 1000) -> int:
        """Delete finished jobs older than ``older_than`` (database clock); return how many."""
        ...

    async def depth(self) -> list[QueueDepth]:
        """Job counts per queue and state."""
        ...

    async def events(self, job_id: UUID) -> list[Event]:
        """A job's recorded transitions, oldest first."""
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
class Dispatcher(Protocol):
    """Wakes waiting workers when jobs are enqueued; a latency optimisation only."""

    async def wait(self, queues: Sequence[str], timeout: float) -> bool:  # noqa: ASYNC109
        """Wait until one of ``queues`` is notified or ``timeout`` seconds pass.

        Returns True when woken by a notification. Notifications that arrive
        while nobody waits are coalesced into one pending wake-up.
        """
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
