"""Rows of the generated layer to domain objects, and domain values to parameters.

Each mapping lives here exactly once, so the store never builds a ``Job`` by
hand (psycopg's errors are mapped in :mod:`jobrun.postgres.errors_map`). Rows
come from the database already typed, so the domain objects are built without
re-validating them (``model_construct``): on the claim path that is the
difference between microseconds and tens of microseconds per job.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from jobrun.domain import (
    Backoff,
    BackoffKind,
    Event,
    Job,
    JobState,
    NewJob,
    QueueControls,
    QueueDepth,
    QueueInfo,
    QueueStats,
    Schedule,
    WorkerOffer,
    encode_payload,
)
from jobrun.errors import (
    InvalidTransition,
    JobNotFound,
)
from jobrun.sqlc import models

__all__ = [
    "backoff_of",
    "depth_from_row",
    "dump_dt",
    "encode_payload",
    "event_from_row",
    "job_from_handoff",
    "job_from_new",
    "job_from_row",
    "job_from_search_row",
    "job_from_transition",
    "job_handed",
    "job_recorded",
    "normal_json",
    "offer_from_row",
    "queue_from_row",
    "queue_info_from_row",
    "queue_stats_from_row",
    "schedule_from_row",
    "utc",
]

_STATES = {state.value: state for state in JobState}
_M = TypeVar("_M", bound=BaseModel)
_setattr = object.__setattr__
_all_fields: dict[type[BaseModel], set[str]] = {}


def _trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """Build a model from values the database already typed, skipping validation.

    pydantic's own ``model_construct`` still walks every field in Python and
    costs tens of microseconds per object, which the claim and batch paths
    pay per job; setting the instance dict directly costs about one.
    """
    obj = cls.__new__(cls)
    _setattr(obj, "__dict__", values)
    # Every field is set, so the set of set fields is the class's field set:
    # one shared, unchanging set instead of a new one per object (the models
    # built here are frozen, so nothing adds to it).
    fields = _all_fields.get(cls)
    if fields is None or len(fields) != len(values):
        fields = set(values)
        if len(values) == len(cls.model_fields):
            _all_fields[cls] = fields
    _setattr(obj, "__pydantic_fields_set__", fields)
    _setattr(obj, "__pydantic_extra__", None)
    _setattr(obj, "__pydantic_private__", None)
    return obj


_KINDS = {kind.value: kind for kind in BackoffKind}


def utc(value: datetime) -> datetime:
    """The same instant in UTC (the server may hand back another time zone)."""
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


_backoffs: dict[tuple[Any, Any, Any], Backoff] = {}
_TIME_COLUMNS = ("run_at", "lease_expires_at", "created_at", "updated_at", "finished_at")


def backoff_of(kind: Any, base: Any, cap: Any) -> Backoff:
    """A Backoff from stored columns, trusted as the CHECK constraints hold.

    Nearly every job carries one of a handful of policies, so the frozen
    instances are shared instead of built per row.
    """
    key = (kind, base, cap)
    found = _backoffs.get(key)
    if found is None:
        if len(_backoffs) >= 1024:
            _backoffs.clear()
        found = _backoffs[key] = _trusted(
            Backoff, {"kind": _KINDS[str(kind)], "base": base, "max": cap}
        )
    return found


def job_from_row(row: models.Job) -> Job:
    """The domain Job for a full jobs row.

    Built from the row's own field dict: on the claim path this runs once
    per job, so it avoids per-field calls. Pools opened by jobrun run their
    sessions in UTC; timestamps from any other session are converted.
    """
    return _job_from_columns(dict(row.__dict__))


def job_from_search_row(row: Any) -> Job:
    """The domain Job of a search's row (a whole jobs row, with the walk's two columns)."""
    values = dict(row.__dict__)
    del values["walked"], values["matched"]
    return _job_from_columns(values)


def job_from_transition(job_id: UUID, verb: str, row: Any | None) -> Job:
    """The job a one-statement transition left, or the error its answer means.

    ``JobCancel``, ``JobRetry`` and ``JobRunNow`` decide and act in one statement and return
    the job's row with the state they found it in and the action they took:
    no row is :class:`~jobrun.errors.JobNotFound`, the action ``refused`` is
    :class:`~jobrun.errors.InvalidTransition` naming that state and ``verb``.
    """
    if row is None:
        raise JobNotFound(job_id)
    values = dict(row.__dict__)
    found_state = values.pop("found_state")
    if values.pop("action") == "refused":
        raise InvalidTransition(job_id, str(found_state), verb)
    return _job_from_columns(values)


def _job_from_columns(values: dict[str, Any]) -> Job:
    # Whether a heartbeat confirmed a handoff is the reaper's business only,
    # and a uniqueness key (a hash) the enqueue's.
    del values["handed"], values["unique_key"], values["unique_states"]
    values["state"] = _STATES[values["state"]]
    values["backoff"] = backoff_of(
        values.pop("backoff_kind"), values.pop("backoff_base"), values.pop("backoff_max")
    )
    if values["created_at"].tzinfo is not UTC:
        for column in _TIME_COLUMNS:
            if values[column] is not None:
                values[column] = values[column].astimezone(UTC)
    return _trusted(Job, values)


def job_from_handoff(text: str) -> Job:
    """The Job a handoff notification carries (``JobInsertNotify`` builds the JSON).

    A handed job was inserted leased, as attempt 1, by the statement that
    sent it: the fields the JSON leaves out hold their insert-time values.
    Raises ValueError (or KeyError, TypeError) when ``text`` is not such a job.
    """
    values = json.loads(text)
    backoff = backoff_of(
        values.pop("backoff_kind"),
        timedelta(seconds=float(values.pop("backoff_base"))),
        timedelta(seconds=float(values.pop("backoff_max"))),
    )
    created_at = utc(datetime.fromisoformat(values["created_at"]))
    lease_expires_at = utc(datetime.fromisoformat(values["lease_expires_at"]))
    return _trusted(
        Job,
        {
            "id": UUID(values["id"]),
            "queue": values["queue"],
            "type": values["type"],
            "payload": values["payload"],
            "priority": int(values["priority"]),
            "state": JobState.LEASED,
            "attempts": int(values["attempts"]),
            "max_attempts": int(values["max_attempts"]),
            "backoff": backoff,
            "run_at": utc(datetime.fromisoformat(values["run_at"])),
            "lease_owner": str(values["lease_owner"]),
            "lease_expires_at": lease_expires_at,
            "cancel_requested": False,
            "idempotency_key": None,
            "last_error": None,
            "created_at": created_at,
            "updated_at": created_at,
            "finished_at": None,
            "meta": dict(values["meta"] or {}),
        },
    )


def job_handed(job: Job, owner: str, lease_expires_at: datetime) -> Job:
    """``job`` as its enqueue left it after handing it to ``owner``: leased, attempt 1."""
    values = job.__dict__.copy()
    values["state"] = JobState.LEASED
    values["attempts"] = 1
    values["lease_owner"] = owner
    values["lease_expires_at"] = lease_expires_at
    return _trusted(Job, values)


def offer_from_row(row: models.WorkerOffer) -> WorkerOffer:
    """The domain WorkerOffer for a worker_offers row."""
    values = dict(row.__dict__)
    values["expires_at"] = utc(values["expires_at"])
    return _trusted(WorkerOffer, values)


def job_recorded(job: Job, row: Any) -> Job:
    """``job`` (as claimed) as an outcome left it, from the columns the outcome changed.

    ``row`` has ``state``, ``attempts``, ``run_at``, ``finished_at``,
    ``last_error`` and ``updated_at``; the lease is always cleared.
    """
    values = job.__dict__.copy()
    finished_at = row.finished_at
    values["state"] = _STATES[row.state]
    values["attempts"] = row.attempts
    values["run_at"] = utc(row.run_at)
    values["lease_owner"] = None
    values["lease_expires_at"] = None
    values["last_error"] = row.last_error
    values["finished_at"] = None if finished_at is None else utc(finished_at)
    values["updated_at"] = utc(row.updated_at)
    return _trusted(Job, values)


def job_from_new(
    job: NewJob,
    payload: Any,
    run_at: datetime,
    now: datetime,
    meta: dict[str, Any] | None = None,
) -> Job:
    """The Job a COPY-inserted NewJob became: every column is known without reading it back.

    ``run_at`` and ``now`` must already be in UTC (the callers' are: database
    now through :func:`utc`, and times derived from it); ``meta`` is what was
    written to the meta column (nothing: its default, ``{}``). A batch builds
    one per job, so this is a dict literal and no conversions.
    """
    return _trusted(
        Job,
        {
            "id": job.id,
            "queue": job.queue,
            "type": job.type,
            "payload": payload,
            "priority": job.priority,
            "state": JobState.QUEUED,
            "attempts": 0,
            "max_attempts": job.max_attempts,
            "backoff": job.backoff,
            "run_at": run_at,
            "lease_owner": None,
            "lease_expires_at": None,
            "cancel_requested": False,
            "idempotency_key": job.idempotency_key,
            "last_error": None,
            "created_at": now,
            "updated_at": now,
            "finished_at": None,
            "meta": dict(meta) if meta else {},
        },
    )


def event_from_row(row: models.JobEvent) -> Event:
    """The domain Event for a job_events row."""
    return _trusted(
        Event,
        dict(
            id=row.id,
            job_id=row.job_id,
            at=utc(row.at),
            kind=row.kind,
            from_state=None if row.from_state is None else _STATES[str(row.from_state)],
            to_state=_STATES[str(row.to_state)],
            attempt=row.attempt,
            owner=row.owner,
            detail=row.detail,
        ),
    )


def schedule_from_row(row: models.Schedule) -> Schedule:
    """The domain Schedule for a schedules row."""
    return _trusted(
        Schedule,
        dict(
            id=row.id,
            name=row.name,
            type=row.type,
            queue=row.queue,
            payload=row.payload,
            priority=row.priority,
            max_attempts=row.max_attempts,
            cron=row.cron,
            every=row.every,
            timezone=row.timezone,
            next_run_at=utc(row.next_run_at),
            last_run_at=_utc_or_none(row.last_run_at),
            paused=row.paused,
            created_at=utc(row.created_at),
            updated_at=utc(row.updated_at),
            changed_by=row.changed_by,
            origin=row.origin,
            declared_group=row.declared_group,
            declared_digest=row.declared_digest,
            removed_from_code_at=_utc_or_none(row.removed_from_code_at),
        ),
    )


def queue_stats_from_row(row: Any) -> QueueStats:
    """One queue's QueueStats from a ``JobQueueStats`` row."""
    return _trusted(
        QueueStats,
        dict(queue=row.queue, queued=row.queued, due=row.due, leased=row.leased, lag=row.lag),
    )


def queue_from_row(row: models.Queue) -> QueueControls:
    """The domain QueueControls for a queues row."""
    return _trusted(
        QueueControls,
        dict(
            name=row.name,
            paused=row.paused,
            concurrency_limit=row.concurrency_limit,
            rate_limit=row.rate_limit,
            rate_interval=row.rate_interval,
            key_limit=row.key_limit,
            changed_by=row.changed_by,
        ),
    )


def queue_info_from_row(row: Any) -> QueueInfo:
    """The domain QueueInfo for a QueueList row."""
    return _trusted(
        QueueInfo,
        dict(
            name=row.name,
            paused=row.paused,
            concurrency_limit=row.concurrency_limit,
            rate_limit=row.rate_limit,
            rate_interval=row.rate_interval,
            key_limit=row.key_limit,
            changed_by=row.changed_by,
            queued=row.queued,
            leased=row.leased,
        ),
    )


def depth_from_row(queue: str, state: Any, count: int, oldest: datetime | None) -> QueueDepth:
    """One QueueDepth line."""
    return _trusted(
        QueueDepth,
        dict(
            queue=queue,
            state=_STATES[str(state)],
            count=count,
            oldest_created_at=_utc_or_none(oldest),
        ),
    )


def normal_json(text: str) -> Any:
    """The JSON value PostgreSQL will hand back for ``text`` (tuples become lists, ...)."""
    return json.loads(text)


def dump_dt(value: datetime) -> str:
    """An ISO-8601 UTC text for keys built from times."""
    return utc(value).isoformat()
