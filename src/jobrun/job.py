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

import json
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from jobrun.errors import (
    CommitTimeout,
    ConfigurationError,
    DatabaseUnavailable,
    DurationError,
    IdempotencyConflict,
    InvalidJob,
    InvalidPayload,
    InvalidSchedule,
    InvalidTransition,
    JobNotFound,
    JobrunError,
    LeaseLost,
    MigrationError,
    PayloadTooLarge,
    PoolExhausted,
    ScheduleNotFound,
    SchemaMissing,
    UnknownJobType,
    UsageError,
)

__all__ = [
    "MAX_ATTEMPTS_LIMIT",
    "MAX_DELAY",
    "MAX_PAYLOAD_DEPTH",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "RUN_AT_FLOOR",
    "RUN_AT_LIMIT",
    "Backoff",
    "BackoffKind",
    "CommitCallback",
    "CommitTimeout",
    "Completion",
    "ConfigurationError",
    "DatabaseUnavailable",
    "Dispatcher",
    "DurationError",
    "Event",
    "EventMode",
    "IdempotencyConflict",
    "InvalidJob",
    "InvalidPayload",
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
    "Outcome",
    "OutcomeKind",
    "PayloadTooLarge",
    "PoolExhausted",
    "QueueDepth",
    "Schedule",
    "ScheduleNotFound",
    "SchedulePatch",
    "Schedules",
    "SchemaMissing",
    "Store",
    "SyncCommitCallback",
    "SyncCompletion",
    "SyncOutcome",
    "UnknownJobType",
    "UsageError",
    "duration_problem",
    "new_job_id",
    "new_job_problem",
    "payload_problem",
    "text_problem",
]

DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 25

# -- limits -------------------------------------------------------------------------
# Every bound below is a domain rule with its own message, checked before any
# row is written; none of them is left to a column type or to an overflow.

MIN_PRIORITY = -32768
"""The lowest priority number. Lower numbers run first; the default is 0."""
MAX_PRIORITY = 32767
"""The highest priority number, run last; the range is that of a 16-bit integer."""
MAX_ATTEMPTS_LIMIT = 10_000
"""The most attempts a job may be given; even a 1 s constant backoff then retries for hours."""
MAX_DELAY = timedelta(days=36_525)
"""The longest delay, backoff, interval or age anywhere in jobrun: 100 years (36525 days).

Far beyond any real schedule, and small enough that database now plus it stays
inside the dates Python and PostgreSQL both represent.
"""
RUN_AT_FLOOR = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest ``run_at`` accepted; any past time means "due now" anyway."""
RUN_AT_LIMIT = datetime(9999, 1, 1, tzinfo=UTC)
"""``run_at`` must be before this instant, so it converts to UTC and back without overflow."""
MAX_PAYLOAD_DEPTH = 100
"""How deeply a payload's arrays and objects may nest (a scalar or ``{}`` is one level)."""

_MAX_DELAY_TEXT = "100 years (36525 days)"
_ZERO = timedelta(0)


def text_problem(field: str, value: str) -> str | None:
    """Why ``value`` cannot be stored in a PostgreSQL text column, or None.

    PostgreSQL text holds no NUL character, and UTF-8 has no encoding for a
    lone surrogate (Python hands undecodable bytes of ``argv`` over as those).
    """
    if "\x00" in value:
        return f"{field} must not contain a NUL character"
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            char = ord(exc.object[exc.start])
            return f"{field} must be valid Unicode text: it holds a lone surrogate (U+{char:04X})"
    return None


def duration_problem(field: str, value: timedelta, *, positive: bool = False) -> str | None:
    """Why ``value`` is not a usable duration (negative, zero when ``positive``, too long)."""
    if positive and value <= timedelta(0):
        return f"{field} must be positive"
    if value < timedelta(0):
        return f"{field} must not be negative"
    if value > MAX_DELAY:
        return f"{field} must be at most {_MAX_DELAY_TEXT}"
    return None


def _run_at_problem(value: datetime) -> str | None:
    # Comparing aware datetimes never overflows; converting them might, hence the bounds.
    if value.tzinfo is None:
        return "run_at must be timezone-aware"
    if value < RUN_AT_FLOOR:
        return "run_at must not be before 1970-01-01 UTC"
    if value >= RUN_AT_LIMIT:
        return "run_at must be before 9999-01-01 UTC"
    return None


def _json_key(key: object) -> str:
    # ASCII-escaped, so a message naming a bad key can itself always be printed.
    return f"[{json.dumps(key)}]" if isinstance(key, str) else f"[{key!r}]"


def payload_problem(payload: Any) -> str | None:
    """Why ``payload`` cannot be stored as jsonb, naming where, or None.

    Walks the decoded value, keys included, for what jsonb refuses: a NUL
    character, a lone surrogate, nesting deeper than MAX_PAYLOAD_DEPTH.
    Iterative, so no depth makes it recurse. It costs a visit per value; the
    store calls it only when a cheap test on the encoded text says it might
    find something.
    """
    stack: list[tuple[Any, str, int]] = [(payload, "payload", 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            problem = text_problem(path, value)
            if problem is not None:
                return problem
            continue
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list | tuple):
            items = enumerate(value)
        else:
            continue
        if depth > MAX_PAYLOAD_DEPTH:
            return f"payload is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
        for key, child in items:
            if isinstance(key, str):
                problem = text_problem(f"a key in {path}", key)
                if problem is not None:
                    return problem
            stack.append((child, path + _json_key(key), depth + 1))
    return None


def _checked_text(value: str | None, info: ValidationInfo) -> str | None:
    if value is not None:
        problem = text_problem(info.field_name or "text", value)
        if problem is not None:
            raise ValueError(problem)
    return value


def _check_every(every: timedelta | None) -> None:
    if every is not None:
        problem = duration_problem("every", every, positive=True)
        if problem is not None:
            raise ValueError(problem)


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


def describe_invalid(what: str, exc: ValidationError) -> str:
    """One line naming every field pydantic refused: ``invalid job: priority: ...``."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return f"invalid {what}: {'; '.join(parts)}"


class _Input(BaseModel):
    """A model users build from their own input: bad fields raise jobrun's error, not pydantic's.

    The one exception tree holds at construction too: ``NewJob(priority=99999)``
    raises :class:`InvalidJob` (still a ``ValueError``), naming the field.
    """

    _invalid: ClassVar[type[JobrunError]] = InvalidJob
    _what: ClassVar[str] = "job"

    if not TYPE_CHECKING:  # mypy keeps the pydantic plugin's typed __init__

        def __init__(self, /, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise self._invalid(describe_invalid(self._what, exc)) from exc


class BackoffKind(StrEnum):
    """How the wait before a retry grows with the attempt number."""

    CONSTANT = "constant"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"


class Backoff(_Input):
    """A job's own retry policy: wait ``base`` grown by ``kind``, never more than ``max``.

    After failed attempt ``n`` (1 for the first run) a job waits ``base``
    (constant), ``base * n`` (linear) or ``base * 2**(n-1)`` (exponential),
    capped at ``max``, then spread by the store's ``retry_jitter``. The
    arithmetic runs in the database (``job_backoff_delay``, migration 00003),
    the one place it is written, for failures and reaped leases alike.
    """

    _what: ClassVar[str] = "backoff"

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
        if self.max > MAX_DELAY:
            raise ValueError(f"backoff max must be at most {_MAX_DELAY_TEXT}")
        return self


DEFAULT_BACKOFF = Backoff()
"""Exponential from 1 second, capped at 1 hour: the policy of a job that names none."""


def _bounded_nesting(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate a JSON payload, turning pydantic's own depth guard into our limit's message.

    pydantic refuses a value nested a few hundred levels deep with one
    location segment per level; the limit itself is enforced when the store
    encodes the payload (:func:`payload_problem`).
    """
    try:
        return handler(value)
    except ValidationError as exc:
        if any(err["type"] == "recursion_depth_exceeded" for err in exc.errors()):
            raise ValueError(
                f"payload is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
            ) from None
        raise


class NewJob(_Input):
    """A job to enqueue. ``delay`` and ``run_at`` are exclusive; both are optional."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(min_length=1, max_length=255)
    payload: JsonValue = Field(default_factory=dict)
    queue: str = Field(default=DEFAULT_QUEUE, min_length=1, max_length=128)
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=MAX_ATTEMPTS_LIMIT)
    # One shared default: Backoff is frozen, and building one per job is a
    # measurable share of a 100,000-job batch.
    backoff: Backoff = Field(default=DEFAULT_BACKOFF)
    run_at: datetime | None = None
    delay: timedelta | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=512)
    id: UUID = Field(default_factory=new_job_id)

    _payload = field_validator("payload", mode="wrap")(_bounded_nesting)

    @field_validator("run_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("run_at must be timezone-aware")
        return value

    @model_validator(mode="after")
    def _check(self) -> NewJob:
        if self.run_at is not None and self.delay is not None:
            raise ValueError("give run_at or delay, not both")
        problem = new_job_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self


def new_job_problem(job: NewJob) -> str | None:
    """Why ``job`` cannot be stored, or None; the payload aside (the store encodes it).

    NewJob runs this at construction. The store runs it again before writing,
    because ``model_copy(update=...)`` and ``model_construct`` skip validation,
    and a value they let through would otherwise surface as a database error.
    A valid job passes one expression of cheap tests; only a job that fails
    one of them is looked at field by field for the message.
    """
    key, delay, run_at = job.idempotency_key, job.delay, job.run_at
    if (
        job.type.isascii()
        and "\x00" not in job.type
        and job.queue.isascii()
        and "\x00" not in job.queue
        and (key is None or (key.isascii() and "\x00" not in key))
        and MIN_PRIORITY <= job.priority <= MAX_PRIORITY
        and 1 <= job.max_attempts <= MAX_ATTEMPTS_LIMIT
        and (delay is None or _ZERO <= delay <= MAX_DELAY)
        and (
            run_at is None or (run_at.tzinfo is not None and RUN_AT_FLOOR <= run_at < RUN_AT_LIMIT)
        )
    ):
        return None
    for field, text in (
        ("type", job.type),
        ("queue", job.queue),
        ("idempotency_key", job.idempotency_key),
    ):
        if text is not None:
            problem = text_problem(field, text)
            if problem is not None:
                return problem
    if not MIN_PRIORITY <= job.priority <= MAX_PRIORITY:
        return f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}, not {job.priority}"
    if not 1 <= job.max_attempts <= MAX_ATTEMPTS_LIMIT:
        return f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, not {job.max_attempts}"
    if job.delay is not None:
        problem = duration_problem("delay", job.delay)
        if problem is not None:
            return problem
    if job.run_at is not None:
        return _run_at_problem(job.run_at)
    return None


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

    @field_validator("queue", "type")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _checked_text(value, info)


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


class NewSchedule(_Input):
    """A schedule to create: a job template fired on a cron expression or a fixed interval."""

    _invalid: ClassVar[type[JobrunError]] = InvalidSchedule
    _what: ClassVar[str] = "schedule"

    name: str = Field(min_length=1, max_length=255)
    type: str = Field(min_length=1, max_length=255)
    payload: JsonValue = Field(default_factory=dict)
    queue: str = Field(default=DEFAULT_QUEUE, min_length=1, max_length=128)
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=MAX_ATTEMPTS_LIMIT)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"

    _payload = field_validator("payload", mode="wrap")(_bounded_nesting)

    @field_validator("name", "type", "queue", "cron", "timezone")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _checked_text(value, info)

    @model_validator(mode="after")
    def _one_trigger(self) -> NewSchedule:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of cron and every")
        _check_every(self.every)
        return self


class SchedulePatch(_Input):
    """Fields of a schedule to change; ``None`` leaves a field as it is."""

    _invalid: ClassVar[type[JobrunError]] = InvalidSchedule
    _what: ClassVar[str] = "schedule change"

    type: str | None = Field(default=None, min_length=1, max_length=255)
    payload: JsonValue | None = None
    queue: str | None = Field(default=None, min_length=1, max_length=128)
    priority: int | None = Field(default=None, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    max_attempts: int | None = Field(default=None, ge=1, le=MAX_ATTEMPTS_LIMIT)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str | None = None

    _payload = field_validator("payload", mode="wrap")(_bounded_nesting)

    @field_validator("type", "queue", "cron", "timezone")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _checked_text(value, info)

    @model_validator(mode="after")
    def _check(self) -> SchedulePatch:
        _check_every(self.every)
        return self


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


class OutcomeKind(StrEnum):
    """How an attempt ended, as the worker reports it to the store.

    Where each kind takes the job is decided in one place, the database's
    ``job_outcome_state`` (migration 00003); a requested cancel always wins.
    """

    COMPLETE = "complete"
    """The handler returned: succeeded, its commit callback (if any) committed."""
    FAIL = "fail"
    """The attempt failed: queued again after the job's backoff, or dead."""
    RELEASE = "release"
    """Handed back unfinished (shutdown): queued, due now, the attempt not counted."""
    SNOOZE = "snooze"
    """The handler asked to run later (``raise Snooze``): queued after ``delay``,
    the attempt not counted."""
    CANCEL = "cancel"
    """The handler ended its own job (``raise Cancel``): cancelled now."""


@dataclass(slots=True)
class Outcome:
    """One attempt's outcome, recorded by the store in a batch with others.

    A plain dataclass, not a pydantic model: the worker builds one per job on
    the hot path, and the Job inside is already valid. ``job`` is the job as
    it was claimed: its attempt number is part of the lease fence. ``detail``
    is the error or reason ("" keeps the job's last error); ``delay`` is a
    snooze's wait. The store counts in ``invocations`` how often it called
    ``commit``: more than once means a group commit was rolled back and the
    callback ran again (see :data:`CommitCallback`).
    """

    job: Job
    kind: OutcomeKind = OutcomeKind.COMPLETE
    commit: CommitCallback | None = None
    detail: str = ""
    delay: timedelta = timedelta(0)
    invocations: int = 0


Completion = Outcome
"""An :class:`Outcome` of kind complete (the default kind): ``Completion(job, commit)``."""


SyncCommitCallback = Callable[[Any], None]
"""A commit callback for the synchronous store (:class:`jobrun.postgres.SyncStore`).

The same contract as :data:`CommitCallback`, called with a sync
``psycopg.Connection`` and returning nothing.
"""


@dataclass(slots=True)
class SyncOutcome:
    """One attempt's outcome for the synchronous store; see :class:`Outcome`."""

    job: Job
    kind: OutcomeKind = OutcomeKind.COMPLETE
    commit: SyncCommitCallback | None = None
    detail: str = ""
    delay: timedelta = timedelta(0)
    invocations: int = 0


SyncCompletion = SyncOutcome
"""A :class:`SyncOutcome` of kind complete: ``SyncCompletion(job, commit)``."""


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

    async def heartbeat(self, owner: str, jobs: Sequence[Job], lease: timedelta) -> set[UUID]:
        """Extend live leases on ``jobs`` to database now + ``lease``; return the ids kept."""
        ...

    async def complete(self, job: Job, owner: str, commit: CommitCallback | None = None) -> Job:
        """Mark a leased job done, running ``commit`` in the same transaction."""
        ...

    async def record_outcomes(
        self, owner: str, outcomes: Sequence[Outcome]
    ) -> list[Job | Exception]:
        """Record many attempts' outcomes in as few statements as they allow.

        One result per input, in order: the job as it was left, LeaseLost, or
        the error of a commit callback.
        """
        ...

    async def fail(self, job: Job, owner: str, error: str) -> Job:
        """Record a failed attempt: queued after the job's backoff, dead, or cancelled."""
        ...

    async def release(self, job: Job, owner: str, reason: str) -> Job:
        """Hand an unfinished job back: queued, due now, the attempt not counted."""
        ...

    async def reap_expired(self, limit: int = 1000, *, now: datetime | None = None) -> list[Job]:
        """Requeue, kill or cancel jobs whose lease expired by database now (or ``now``)."""
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

    async def prune_effects(self, older_than: timedelta) -> int:
        """Delete effect-ledger rows older than ``older_than`` whose job is gone."""
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
