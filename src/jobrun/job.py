"""The domain of jobrun: jobs, schedules, outcomes and their rules as plain data.

Everything here is plain data: no I/O, no SQL, no psycopg. The ports the
runtime consumes are in :mod:`jobrun.ports`; the PostgreSQL package
(:mod:`jobrun.postgres`) implements them. Keeping that line sharp is what lets
the contract be tested in one place.

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

import hashlib
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID, SafeUUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from jobrun.errors import ConfigurationError, InvalidJob, InvalidSchedule, JobrunError

__all__ = [
    "DEFAULT_NOTIFY_CHANNEL",
    "HANDOFF_CONFIRM_WITHIN",
    "MAX_ATTEMPTS_LIMIT",
    "MAX_DELAY",
    "MAX_PAYLOAD_DEPTH",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "NOTIFY_CHANNEL_MAX_BYTES",
    "RUN_AT_FLOOR",
    "RUN_AT_LIMIT",
    "Backoff",
    "BackoffKind",
    "CommitCallback",
    "Effect",
    "Event",
    "EventMode",
    "HandoffOffer",
    "Job",
    "JobFilter",
    "JobPage",
    "JobState",
    "NewJob",
    "NewSchedule",
    "Outcome",
    "OutcomeKind",
    "QueueControls",
    "QueueDepth",
    "QueueInfo",
    "QueueStats",
    "Schedule",
    "SchedulePatch",
    "SyncCommitCallback",
    "SyncOutcome",
    "WorkerOffer",
    "duration_problem",
    "jobs_alike",
    "key_lock_id",
    "new_job_id",
    "new_job_ids",
    "new_job_problem",
    "notify_channel_problem",
    "parse_job_id",
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
DEFAULT_NOTIFY_CHANNEL = "jobrun"
"""The LISTEN/NOTIFY channel workers wait on; each notification's payload is a queue name."""
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


NOTIFY_CHANNEL_MAX_BYTES = 63
"""The longest LISTEN/NOTIFY channel name PostgreSQL takes, in UTF-8 bytes (NAMEDATALEN - 1)."""


def notify_channel_problem(channel: str) -> str | None:
    """Why ``channel`` cannot be the LISTEN/NOTIFY channel, or None.

    ``pg_notify`` refuses a longer name, which would fail every enqueue that
    announces its job, and ``LISTEN`` would quietly listen on a shortened one.
    """
    if not channel:
        return "notify_channel must not be empty"
    problem = text_problem("notify_channel", channel)
    if problem is not None:
        return problem
    size = len(channel.encode())
    if size > NOTIFY_CHANNEL_MAX_BYTES:
        limit = NOTIFY_CHANNEL_MAX_BYTES
        return f"notify_channel must be at most {limit} bytes (UTF-8), not {size}"
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


_MILLIS_MASK = (1 << 48) - 1
# The version nibble and the variant bits of a UUIDv7, cleared and then set
# over 80 random bits.
_UUID7_CLEAR = ((1 << 128) - 1) ^ ((0xF << 76) | (0b11 << 62))
_UUID7_SET = (0x7 << 76) | (0b10 << 62)
_ID_ENTROPY_BYTES = 10
# Randomness is read from the OS this many bytes at a time: one system call
# per 409 ids instead of one per id, which was a quarter of a NewJob's cost.
_ENTROPY_BLOCK = 4090
_SAFE_UNKNOWN = SafeUUID.unknown
_object_new = object.__new__
_object_setattr = object.__setattr__


class _IdState:
    """The id generator's state: the last id made and the unread randomness.

    One lock serialises the read-compare-write of ``last``: without it, two
    threads in one millisecond could both take the count-up branch from the
    same last id and make the same id.
    """

    __slots__ = ("entropy", "last", "lock", "offset")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last = 0
        self.entropy = b""
        self.offset = 0


_ids = _IdState()


def _fresh_ids_after_fork() -> None:
    # A child that kept its parent's unread randomness and last id would make
    # the parent's next ids too.
    global _ids
    _ids = _IdState()


if hasattr(os, "register_at_fork"):  # no fork, no hook: Windows
    os.register_at_fork(after_in_child=_fresh_ids_after_fork)


def _uuid_of(value: int) -> UUID:
    # What UUID(int=value) builds, without its argument checks (value is
    # already a 128-bit integer): about half the cost. Python 3.14's
    # UUID._from_int does the same.
    made = _object_new(UUID)
    _object_setattr(made, "int", value)
    _object_setattr(made, "is_safe", _SAFE_UNKNOWN)
    return made


def new_job_id() -> UUID:
    """Return a UUIDv7: random, but ordered by creation time.

    Time-ordered ids keep the primary-key index append-mostly and give job
    listings a stable newest-first order for free. Within one process the ids
    are strictly increasing, even inside one millisecond and across threads.
    """
    stamp = ((time.time_ns() // 1_000_000) & _MILLIS_MASK) << 80
    state = _ids
    with state.lock:
        at = state.offset
        if at + _ID_ENTROPY_BYTES > len(state.entropy):
            state.entropy, at = os.urandom(_ENTROPY_BLOCK), 0
        state.offset = at + _ID_ENTROPY_BYTES
        random = int.from_bytes(state.entropy[at : at + _ID_ENTROPY_BYTES], "big")
        # 48 bits of time, then version 7, 12 bits of rand_a, the RFC 9562
        # variant and 62 bits of rand_b.
        value = (stamp | random) & _UUID7_CLEAR | _UUID7_SET
        if value <= state.last:
            # Same millisecond (or a clock step back): count up in rand_b instead.
            value = state.last + 1
        state.last = value
    return _uuid_of(value)


def new_job_ids(count: int) -> list[UUID]:
    """Return ``count`` UUIDv7s as :func:`new_job_id` makes them, strictly increasing.

    One clock read and one draw of randomness serve them all, which is what
    makes a bulk enqueue's ids cheap.
    """
    stamp = ((time.time_ns() // 1_000_000) & _MILLIS_MASK) << 80
    size = _ID_ENTROPY_BYTES
    entropy = os.urandom(size * count)
    values = []
    state = _ids
    with state.lock:
        last = state.last
        for at in range(0, size * count, size):
            # new_job_id's arithmetic, inlined: a helper called per id made
            # bulk ids a fifth dearer.
            random = int.from_bytes(entropy[at : at + size], "big")
            value = (stamp | random) & _UUID7_CLEAR | _UUID7_SET
            if value <= last:
                value = last + 1
            last = value
            values.append(value)
        state.last = last
    return [_uuid_of(value) for value in values]


def parse_job_id(value: object) -> UUID:
    """``value`` as a job id: a UUID, or its text (what a URL, a form or ``argv`` holds).

    Every store method that takes a job id reads it through here, so a
    malformed one is an :class:`InvalidJob` naming it instead of whatever the
    database driver makes of it.
    """
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value.strip())
        except ValueError:
            pass
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise InvalidJob(f"{shown} is not a job id (a UUID)")


def key_lock_id(key: str) -> int:
    """The 64-bit lock id of an application key: the same on every host, process and version.

    The first 8 bytes of the key's BLAKE2b digest, as a signed integer (what
    ``pg_advisory_xact_lock`` takes). Python's ``hash()`` is salted per
    process, and PostgreSQL's ``hashtext`` may change between releases, so
    neither could give every worker the same id for the same key.
    """
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"a lock key must be a non-empty string, got {key!r}")
    try:
        data = key.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(f"lock key {key!r} is not valid text") from None
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


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


_PAYLOADS: TypeAdapter[list[JsonValue]] = TypeAdapter(list[JsonValue])


def jobs_alike(job_type: str, payloads: Iterable[Any], **fields: Any) -> tuple[NewJob, list[Any]]:
    """Check a bulk enqueue: jobs of one type alike in every field but the payload.

    Returns the shared fields as one validated NewJob (its payload and id
    unused) and the payloads as JSON values, in order. Raises InvalidJob
    naming the field, or the index of the first payload that is not JSON.
    ``fields`` are NewJob's own (queue, priority, max_attempts, backoff,
    delay, run_at); an idempotency key or an id is per job, so neither is
    accepted here.
    """
    for name in fields:
        if name in ("payload", "idempotency_key", "id") or name not in NewJob.model_fields:
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
    """Filters for :meth:`jobrun.ports.Admin.list_jobs`; ``None`` means any."""

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


class QueueStats(BaseModel):
    """One queue's backlog as the claim sees it, read from the partial indexes only.

    ``lag`` is how long the oldest *due* job has waited since its ``run_at``
    (zero when none is due): a job delayed to later is not late.
    """

    queue: str
    queued: int
    """Jobs waiting, due or not."""
    due: int
    """Waiting jobs whose run_at has come."""
    leased: int
    """Jobs running (leased) right now."""
    lag: timedelta
    """Database now minus the oldest due job's run_at; zero when none is due."""


MAX_QUEUE_LIMIT = 2**31 - 1
"""The largest concurrency limit or rate count a queue can have (a PostgreSQL integer)."""


def queue_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a queue (empty, longer than 128, not storable), or None."""
    if not name:
        return "queue name must not be empty"
    if len(name) > 128:
        return "queue name must be at most 128 characters"
    return text_problem("queue name", name)


def queue_limits_problem(concurrency: int | None, rate: tuple[int, timedelta] | None) -> str | None:
    """Why ``concurrency`` and ``rate`` are not limits a queue can have, or None.

    Both counts must be whole numbers (a bool is not one) in range, the
    interval a positive timedelta.
    """
    if concurrency is None and rate is None:
        return "give a concurrency limit, a rate, or both"
    if concurrency is not None:
        if not _is_whole(concurrency):
            return f"concurrency limit must be a whole number, got {concurrency!r}"
        if not 1 <= concurrency <= MAX_QUEUE_LIMIT:
            return f"concurrency limit must be between 1 and {MAX_QUEUE_LIMIT}, got {concurrency}"
    if rate is not None:
        if not isinstance(rate, tuple | list) or len(rate) != 2:
            return f"rate must be (count, interval), got {rate!r}"
        count, interval = rate
        if not _is_whole(count):
            return f"rate count must be a whole number, got {count!r}"
        if not 1 <= count <= MAX_QUEUE_LIMIT:
            return f"rate count must be between 1 and {MAX_QUEUE_LIMIT}, got {count}"
        if not isinstance(interval, timedelta):
            return f"rate interval must be a timedelta, got {interval!r}"
        return duration_problem("rate interval", interval, positive=True)
    return None


def _is_whole(value: object) -> bool:
    # A bool is an int to Python but not a count to anyone; a float would be
    # rounded silently by the database.
    return isinstance(value, int) and not isinstance(value, bool)


class QueueControls(BaseModel):
    """A queue's controls, as the claim enforces them across every worker.

    A queue nobody has paused or limited has no stored row and reads as these
    defaults: not paused, no limits. ``concurrency_limit`` caps the queue's
    leased jobs across all workers; ``rate_limit`` claims per ``rate_interval``
    cap how fast its jobs are claimed (counted in fixed windows aligned to the
    epoch, see the README's "Queue controls"). ``changed_by`` names who made the
    last pause, resume or limit change (e.g. ``ops via web``); None when that
    change named nobody.
    """

    name: str
    paused: bool = False
    concurrency_limit: int | None = None
    rate_limit: int | None = None
    rate_interval: timedelta | None = None
    changed_by: str | None = None


class QueueInfo(QueueControls):
    """A queue's controls and its load right now: jobs queued (due or not) and leased."""

    queued: int = 0
    leased: int = 0


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
    """A stored schedule; ``changed_by`` names who last paused or resumed it, if anyone said."""

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
    changed_by: str | None = None


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


@dataclass(frozen=True, slots=True)
class Effect:
    """A commit callback that is one SQL statement: what most effects are.

    ``return Effect("INSERT INTO sent (job_id) VALUES (%s)", (ctx.job.id,))``
    from a handler does what a callback running that statement does, with
    the same guarantees: the statement runs in the completion transaction
    after the ledger row is written, is skipped when the job's effect already
    committed, and rolls back with everything else. Because the store sees
    the statement instead of a function, the Effects of one completion batch
    that share their SQL text go to the server as one ``executemany`` (one
    pipelined batch) after the batch's function callbacks, instead of a
    statement call per job: the exactly-once path at a fraction of the cost.
    ``params`` are psycopg's (a sequence for ``%s``, a mapping for
    ``%(name)s``).
    """

    sql: str
    """The statement, with psycopg placeholders."""
    params: Sequence[Any] | Mapping[str, Any] | None = None
    """Its parameters."""

    async def __call__(self, conn: Any) -> None:
        """Run the statement on ``conn`` (as a plain commit callback would)."""
        await conn.execute(self.sql, self.params)


class OutcomeKind(StrEnum):
    """How an attempt ended, as the worker reports it to the store.

    Where each kind takes the job is decided in one place, the database's
    ``job_outcome_state`` (migration 00003); a requested cancel always wins.
    """

    COMPLETE = "complete"
    """The handler returned: succeeded, its commit callback (if any) committed.

    A cancel requested before the completion still wins: the job ends
    cancelled and its commit callback is not run.
    """
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
    snooze's wait. ``max_attempts`` bounds a failure below the job's own
    ``max_attempts`` and makes ``delay`` its wait instead of the job's
    backoff: the worker's policy for a job it cannot run (see
    :class:`jobrun.unrunnable.UnrunnableRetry`). The store counts in
    ``invocations`` how often it called ``commit``: more than once means a
    group commit was rolled back and the callback ran again (see
    :data:`CommitCallback`).
    """

    job: Job
    kind: OutcomeKind = OutcomeKind.COMPLETE
    commit: CommitCallback | None = None
    detail: str = ""
    delay: timedelta = timedelta(0)
    invocations: int = 0
    lock_keys: tuple[str, ...] = ()
    """Application keys the commit callback needs held (``ctx.lock``): the store
    takes them, in one global order, before any callback of the group runs."""
    max_attempts: int | None = None
    """A failure's own attempt limit (with ``delay`` its wait); None: the job's."""


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
    lock_keys: tuple[str, ...] = ()
    max_attempts: int | None = None


HANDOFF_CONFIRM_WITHIN = timedelta(seconds=5)
"""How long a worker has to confirm a job handed to it (see :class:`HandoffOffer`)."""


@dataclass(frozen=True, slots=True)
class HandoffOffer:
    """What an idle worker offers along with a claim: its free slots, for handoff.

    A claim that leaves slots free records them as offers for each claimed
    queue, valid for ``ttl``; a single enqueue due now that finds one leases
    its job to the worker in the same statement and sends the whole job on
    ``channel``, where the worker's dispatcher receives it. Every claim
    rewrites the owner's offers, so they never outlive what the last claim
    knew; an offer left by a worker that died expires after ``ttl``.

    A handed job is leased only for ``confirm_within`` (or the claim's own
    lease, if shorter): the worker's heartbeat of it confirms that it arrived
    and extends the lease to the worker's own. A job the worker never
    received (its listening connection dropped just then) is so not stuck
    for a whole lease: the reaper gives it back as soon as the short lease
    runs out, due at once and its attempt not counted.
    """

    channel: str
    """The LISTEN channel on which the worker's dispatcher receives handed jobs."""
    ttl: timedelta
    """How long the offer stands without a new claim to renew it."""
    confirm_within: timedelta = HANDOFF_CONFIRM_WITHIN
    """The lease a handed job starts with, within which its worker confirms it."""


class WorkerOffer(BaseModel):
    """A standing handoff offer: ``owner`` takes ``slots`` more jobs of ``queue``."""

    owner: str
    queue: str
    channel: str
    slots: int
    lease: timedelta
    """The lease a handed job gets until its worker confirms it (see :class:`HandoffOffer`)."""
    expires_at: datetime
