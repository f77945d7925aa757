"""Jobs: the one to enqueue (:class:`NewJob`), the one stored (:class:`Job`), its history.

States and transitions (every arrow is recorded in ``job_events``)::

    queued ──claim──▶ leased ──complete──▶ succeeded
      ▲                 │ │ └──any outcome with cancel requested──▶ cancelled
      ├──fail (retry)───┘ └──fail, no attempts left──▶ dead
      ├──release (shutdown) / snooze: attempt given back
    queued ──cancel──▶ cancelled;  leased ──cancel (handler)──▶ cancelled
    dead, cancelled ──retry──▶ queued
    leased ──lease expires (reaper)──▶ queued, dead or cancelled

Times are the database's: the store computes run_at, leases and retry times
from database now, and tests may pin it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, TypedDict
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from jobrun.domain.backoff import DEFAULT_BACKOFF, Backoff
from jobrun.domain.ids import new_job_id
from jobrun.domain.inputs import InputModel, bounded_nesting, checked_text
from jobrun.domain.rules import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    MAX_ATTEMPTS_LIMIT,
    MAX_CONCURRENCY_LIMIT,
    MAX_DELAY,
    MAX_PAYLOAD_DEPTH,
    MAX_PRIORITY,
    MIN_PRIORITY,
    RUN_AT_FLOOR,
    RUN_AT_LIMIT,
    duration_problem,
    queue_name_problem,
    run_at_problem,
    text_problem,
)
from jobrun.domain.search import error_search, id_digits, payload_search
from jobrun.domain.uniqueness import Unique
from jobrun.errors import InvalidJob

__all__ = [
    "MAX_DEPENDENCIES",
    "Event",
    "EventMode",
    "Job",
    "JobFilter",
    "JobOptions",
    "JobPage",
    "JobState",
    "NewJob",
    "jobs_alike",
    "new_job_problem",
]

_ZERO = timedelta(0)


class JobState(StrEnum):
    """Where a job is in its life; the terminal states are final until a retry."""

    QUEUED = "queued"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    DEAD = "dead"
    WAITING = "waiting"
    """Enqueued with dependencies that have not all ended (``NewJob.depends_on``);
    never claimed until it becomes ``queued``."""

    @property
    def is_terminal(self) -> bool:
        """True for succeeded, cancelled and dead."""
        return self in (JobState.SUCCEEDED, JobState.CANCELLED, JobState.DEAD)


class NewJob(InputModel):
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
    unique: Unique | None = None
    """A uniqueness policy (:class:`~jobrun.domain.uniqueness.Unique`): while a job
    of the same key holds it, enqueueing this one returns that job instead."""
    depends_on: tuple[UUID, ...] = ()
    """Jobs that must end before this one runs (at most 1,000): it waits, in
    ``waiting``, until each has succeeded (see ``if_dependency_fails``). Each
    must exist when this job is enqueued, so no cycle can form: in a batch,
    the jobs without dependencies go in first, then the others in order."""
    if_dependency_fails: Literal["cancel", "run"] = "cancel"
    """What a dependency that ends dead or cancelled does to this job: cancel
    it, or run it anyway once every dependency has ended."""
    concurrency_key: str | None = Field(default=None, min_length=1, max_length=255)
    """Jobs sharing this key run at most ``concurrency_limit`` at a time,
    fleet-wide (``"customer:7"``); the others wait, in ``waiting``, and are
    admitted in enqueue order as slots free. Jobs of other keys keep flowing."""
    concurrency_limit: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY_LIMIT)
    """How many jobs of ``concurrency_key`` may be admitted at once (queued or
    running); usually declared once for a type, on its handler."""
    id: UUID = Field(default_factory=new_job_id)

    _payload = field_validator("payload", mode="wrap")(bounded_nesting)

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
        if self.concurrency_limit is not None and self.concurrency_key is None:
            # Checked here, not in new_job_problem: a limit declared on the
            # type's handler is filled in (without validation) on every job of
            # the type, and limits only those that carry a key.
            raise ValueError(
                "concurrency_limit needs a concurrency_key: it limits the jobs that share one"
            )
        problem = new_job_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self


MAX_DEPENDENCIES = 1000
"""The most jobs one job may depend on."""


def dependencies_problem(job: NewJob) -> str | None:
    """Why ``job``'s ``depends_on`` cannot be stored, or None."""
    deps = job.depends_on
    if len(deps) > MAX_DEPENDENCIES:
        return f"depends_on holds {len(deps)} jobs, more than {MAX_DEPENDENCIES}"
    if len(set(deps)) != len(deps):
        return "depends_on names a job twice"
    if job.id in deps:
        return "a job cannot depend on itself"
    if job.idempotency_key is not None or job.unique is not None:
        return "a job with depends_on takes no idempotency_key or unique policy"
    return None


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
        and queue_name_problem(job.queue) is None
        and (key is None or (key.isascii() and "\x00" not in key and job.unique is None))
        and not job.depends_on
        and job.concurrency_key is None
        and MIN_PRIORITY <= job.priority <= MAX_PRIORITY
        and 1 <= job.max_attempts <= MAX_ATTEMPTS_LIMIT
        and (delay is None or _ZERO <= delay <= MAX_DELAY)
        and (
            run_at is None or (run_at.tzinfo is not None and RUN_AT_FLOOR <= run_at < RUN_AT_LIMIT)
        )
    ):
        return None
    problem = (
        text_problem("type", job.type)
        or queue_name_problem(job.queue)
        or (text_problem("idempotency_key", key) if key is not None else None)
    )
    if problem is not None:
        return problem
    if key is not None and job.unique is not None:
        return "give an idempotency_key or a unique policy, not both"
    if job.depends_on:
        problem = dependencies_problem(job)
        if problem is not None:
            return problem
    if job.concurrency_key is not None:
        problem = text_problem("concurrency_key", job.concurrency_key)
        if problem is not None:
            return problem
        if job.depends_on or key is not None or job.unique is not None:
            return (
                "a job with a concurrency_key takes no depends_on, idempotency_key or unique policy"
            )
    if not MIN_PRIORITY <= job.priority <= MAX_PRIORITY:
        return f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}, not {job.priority}"
    if not 1 <= job.max_attempts <= MAX_ATTEMPTS_LIMIT:
        return f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, not {job.max_attempts}"
    if job.delay is not None:
        problem = duration_problem("delay", job.delay)
        if problem is not None:
            return problem
    if job.run_at is not None:
        return run_at_problem(job.run_at)
    return None


_PAYLOADS: TypeAdapter[list[JsonValue]] = TypeAdapter(list[JsonValue])


class JobOptions(TypedDict, total=False):
    """The fields jobs enqueued alike share: ``enqueue_many``'s keywords, written once.

    Every ``enqueue_many`` (the port's, the stores', the clients', the test
    doubles') takes ``**options: Unpack[JobOptions]``: callers write
    ``queue="mail", priority=1`` as ever, a type checker refuses a misspelt
    keyword, and an option left out takes :class:`NewJob`'s default, the one
    place defaults are written.
    """

    queue: str
    priority: int
    max_attempts: int
    backoff: Backoff
    delay: timedelta | None
    run_at: datetime | None
    unique: Unique | None


_JOB_OPTIONS = frozenset(JobOptions.__annotations__)


def jobs_alike(job_type: str, payloads: Iterable[Any], **fields: Any) -> tuple[NewJob, list[Any]]:
    """Check a bulk enqueue: jobs of one type alike in every field but the payload.

    Returns the shared fields as one validated NewJob (its payload and id
    unused) and the payloads as JSON values, in order. Raises InvalidJob
    naming the field, or the index of the first payload that is not JSON.
    ``fields`` are :class:`JobOptions` (queue, priority, max_attempts,
    backoff, delay, run_at); an idempotency key or an id is per job, so
    neither is accepted here.
    """
    for name in fields:
        if name not in _JOB_OPTIONS:
            raise InvalidJob(
                f"jobs enqueued alike take no {name}: they share queue, priority, "
                "max_attempts, backoff, delay and run_at (enqueue NewJobs for the rest)"
            )
    template = NewJob(type=job_type, **fields)
    if isinstance(payloads, str | bytes | bytearray | Mapping):
        # A dict would enqueue one job per key, a string one per character.
        raise InvalidJob(
            f"payloads must be a sequence of payloads, one per job, not a {type(payloads).__name__}"
        )
    try:
        values = _PAYLOADS.validate_python(list(payloads))
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        index, *inner = err["loc"]
        # pydantic's location alternates the JSON type it tried with the key or
        # index inside it, ending in "[key]" when a dict key itself is wrong.
        where = "".join(f"[{part!r}]" for part in inner[1::2])
        if inner and inner[-1] == "[key]":
            where += " (a key)"
        if err["type"] == "recursion_depth_exceeded":
            why = f"it is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
        else:
            why = f"{where}: {err['msg']}" if where else str(err["msg"])
        raise InvalidJob(
            f"payload {index} of job type {job_type!r} is not a JSON value: {why}"
        ) from None
    return template, values


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
    meta: dict[str, JsonValue] = Field(default_factory=dict)
    """What jobrun carries with the job besides its payload: the W3C trace context
    (``traceparent``, ``tracestate``) it was enqueued under, when there was one."""


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
    """Filters for :meth:`jobrun.ports.Admin.list_jobs`; ``None`` means any.

    The search fields (``id_prefix``, ``id_suffix``, ``error``, ``payload``)
    make the listing a bounded search: see :mod:`jobrun.domain.search`.
    ``id_prefix`` and ``id_suffix`` are hex digits of a job id (dashes
    dropped, case ignored); ``error`` a piece of the last error, matched
    without regard to case, every character taken literally; ``payload``
    JSON text the payload must contain (``{"customer": 42}``).
    """

    queue: str | None = None
    state: JobState | None = None
    type: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    id_prefix: str | None = None
    id_suffix: str | None = None
    error: str | None = None
    payload: str | None = None

    @field_validator("queue", "type")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        return checked_text(value, info)

    @field_validator("id_prefix", "id_suffix")
    @classmethod
    def _id_part(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else id_digits(info.field_name or "id", value)

    @field_validator("error")
    @classmethod
    def _error(cls, value: str | None) -> str | None:
        return None if value is None else error_search(value)

    @field_validator("payload")
    @classmethod
    def _payload(cls, value: str | None) -> str | None:
        return None if value is None else payload_search(value)

    @property
    def searches(self) -> bool:
        """True when a search field is set, so that listing it is a bounded search."""
        return any(
            v is not None for v in (self.id_prefix, self.id_suffix, self.error, self.payload)
        )


class JobPage(BaseModel):
    """One page of a listing, newest first; pass ``next_cursor`` to get the next page.

    ``scan_cut`` is True when a search stopped at its bound of jobs examined
    before it filled the page: fewer jobs than asked may match so far, and
    ``next_cursor`` (the last job it examined) continues the search below.
    """

    jobs: list[Job]
    next_cursor: UUID | None
    scan_cut: bool = False
