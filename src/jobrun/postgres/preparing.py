"""What an enqueue does before any I/O, shared by the async store and its sync twin.

Validating jobs and payloads, encoding them, deciding whether a job may be handed
off, building the insert's parameters and assembling a batch's results (a replay
or a conflict in its slot) are written once here; the enqueue methods
(:mod:`jobrun.postgres.enqueueing` and its twin) only move them through a connection.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict
from uuid import UUID

from pydantic import BaseModel, ValidationError

from jobrun.domain import (
    BackoffKind,
    Job,
    NewJob,
    jobs_alike,
    new_job_problem,
)
from jobrun.errors import (
    IdempotencyConflict,
    InvalidJob,
    JobrunError,
)
from jobrun.postgres.convert import (
    encode_payload,
    job_from_new,
    job_from_row,
    job_handed,
    normal_json,
    utc,
)
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import models

__all__ = [
    "BACKOFF_KINDS",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "HANDOFF_MAX_BYTES",
    "JobColumns",
    "PreparedJob",
    "PreparedMany",
    "check_job_type",
    "check_replay",
    "handoff_allowed",
    "insert_args",
    "inserted_job",
    "is_plain",
    "job_columns",
    "keyed_arrays",
    "keyed_results",
    "many_jobs",
    "prepare_jobs",
    "prepare_many",
    "queued_insert_args",
    "run_at_of",
    "split_batch",
]


DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20
"""Payloads above 1 MiB are refused: a job queue row is not a blob store."""

_ZERO = timedelta(0)

BACKOFF_KINDS = {kind: models.BackoffKind(kind.value) for kind in BackoffKind}
"""Domain backoff kinds to the generated enum, looked up instead of converted per job."""


@dataclass(slots=True)
class PreparedJob:
    """A NewJob after validation, with its payload's JSON text ready to send."""

    job: NewJob
    payload: Any
    text: str


def _validate_model(
    job_type: str, payload: Any, model: type[BaseModel], what: str = "payload"
) -> Any:
    try:
        return model.model_validate(payload).model_dump(mode="json")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise InvalidJob(
            f"{what} of job type {job_type!r} does not match {model.__name__}: {problems}"
        ) from None


_SHOWN_TYPES = 20


def check_job_type(job_type: str, job_types: Collection[str] | None) -> None:
    """Refuse ``job_type`` with InvalidJob, naming the types that exist, unless it is one.

    ``job_types`` None: every type is accepted (a producer without a registry).
    """
    if job_types is None or job_type in job_types:
        return
    known = sorted(job_types)
    shown = ", ".join(repr(t) for t in known[:_SHOWN_TYPES])
    if len(known) > _SHOWN_TYPES:
        shown += f" and {len(known) - _SHOWN_TYPES} more"
    raise InvalidJob(
        f"job type {job_type!r} is not registered, so no worker of this application could "
        f"run it; registered types: {shown}"
    )


def prepare_jobs(
    jobs: Sequence[NewJob],
    payload_models: Mapping[str, type[BaseModel]],
    max_payload_bytes: int,
    job_types: Collection[str] | None = None,
) -> list[PreparedJob]:
    """Validate every job before any job's row is sent; the first bad one raises InvalidJob.

    With ``job_types`` (a registry's), a job of any other type is refused too.
    """
    prepared = []
    for job in jobs:
        # NewJob checked this at construction; model_copy and model_construct do not.
        problem = new_job_problem(job)
        if problem is not None:
            raise InvalidJob(f"job of type {job.type!r} is refused: {problem}")
        check_job_type(job.type, job_types)
        model = payload_models.get(job.type)
        payload = job.payload if model is None else _validate_model(job.type, job.payload, model)
        text = encode_payload(job.type, payload, max_payload_bytes)
        # Keyed jobs may be compared with a stored payload, so they need the
        # value PostgreSQL will hand back; NewJob already holds a JSON value.
        if model is not None or job.idempotency_key is not None:
            payload = normal_json(text)
        prepared.append(PreparedJob(job, payload, text))
    return prepared


@dataclass(slots=True)
class PreparedMany:
    """Jobs alike but for their payloads, validated, each payload's JSON text ready to send."""

    template: NewJob
    """The fields every job shares (its own payload and id are not used)."""
    payloads: list[Any]
    texts: list[str]


def prepare_many(
    job_type: str,
    payloads: Iterable[Any],
    fields: Mapping[str, Any],
    payload_models: Mapping[str, type[BaseModel]],
    max_payload_bytes: int,
    job_types: Collection[str] | None = None,
) -> PreparedMany:
    """Validate a bulk enqueue before anything is written; the first bad payload raises InvalidJob.

    The shared fields are checked once, as one NewJob (its type against
    ``job_types`` when given); each payload as JSON (against the job type's
    payload model when it has one) and its size.
    """
    template, values = jobs_alike(job_type, payloads, **fields)
    check_job_type(template.type, job_types)
    model = payload_models.get(job_type)
    texts = []
    for index, value in enumerate(values):
        what = f"payload {index}"
        if model is not None:
            value = values[index] = _validate_model(job_type, value, model, what)
        texts.append(encode_payload(job_type, value, max_payload_bytes, what))
    return PreparedMany(template, values, texts)


def many_jobs(
    many: PreparedMany,
    ids: Sequence[UUID],
    run_at: datetime,
    now: datetime,
    meta: dict[str, str] | None = None,
) -> list[Job]:
    """The Jobs a bulk enqueue stored (for an observer: the call itself returns ids)."""
    job = many.template
    return [
        job_from_new(job.model_copy(update={"id": job_id}), payload, run_at, now, meta)
        for job_id, payload in zip(ids, many.payloads, strict=True)
    ]


HANDOFF_MAX_BYTES = 3000
"""The most payload, type, queue and trace context (UTF-8 bytes together) a handed job
carries. Only a cheap first filter: PostgreSQL's notifications hold under 8000
bytes, and the job travels as JSON in one with its payload as jsonb renders it,
which can be many times longer (``1e-40`` becomes 42 digits), so the statement
measures the very text it would send and hands off only what fits."""


def handoff_allowed(item: PreparedJob, meta: dict[str, str] | None) -> bool:
    """Whether a single enqueue of ``item`` may be handed to an idle worker.

    Only a job due now, without an idempotency key (a replay must not use up
    an offer it does not take) or a uniqueness policy (its own statement), and
    small enough to travel in a notification.
    """
    job = item.job
    if job.idempotency_key is not None or job.unique is not None or job.run_at is not None:
        return False
    if job.depends_on:
        return False
    if job.delay:
        return False
    parts = [item.text, job.type, job.queue]
    if meta:
        parts += [*meta.keys(), *meta.values()]
    # Characters first: for ASCII text they are the bytes, and no longer
    # text fits in fewer bytes than it has characters.
    if sum(map(len, parts)) > HANDOFF_MAX_BYTES:
        return False
    if all(part.isascii() for part in parts):
        return True
    return sum(len(part.encode()) for part in parts) <= HANDOFF_MAX_BYTES


class JobColumns(TypedDict):
    """The columns every insert statement of one job takes, named as its parameters are."""

    id: UUID
    queue: str
    type: str
    payload_json: str
    priority: int
    max_attempts: int
    backoff_kind: models.BackoffKind
    backoff_base: timedelta
    backoff_max: timedelta
    run_at: datetime | None
    delay: timedelta


def job_columns(item: PreparedJob) -> JobColumns:
    """``item``'s columns for an insert statement's parameters (its payload as encoded)."""
    job = item.job
    backoff = job.backoff
    return {
        "id": job.id,
        "queue": job.queue,
        "type": job.type,
        "payload_json": item.text,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "backoff_kind": BACKOFF_KINDS[backoff.kind],
        "backoff_base": backoff.base,
        "backoff_max": backoff.max,
        "run_at": job.run_at,
        "delay": job.delay or _ZERO,
    }


def insert_args(
    item: PreparedJob,
    channel: str,
    meta: dict[str, str] | None = None,
    *,
    record_claim: bool = True,
) -> job_queries.JobInsertNotifyParams:
    """The parameters of the generated ``job_insert_notify`` for one job it may hand off.

    ``channel`` is the notification channel; ``meta`` the trace context. The
    payload goes as the JSON text :func:`prepare_jobs` already encoded. Only
    for a job :func:`handoff_allowed` passes; ``record_claim`` records the
    claim of a job handed to an idle worker too.
    """
    return job_queries.JobInsertNotifyParams(
        **job_columns(item), meta=meta, record_claim=record_claim, channel=channel
    )


def queued_insert_args(
    item: PreparedJob, channel: str, meta: dict[str, str] | None = None
) -> job_queries.JobInsertQueuedNotifyParams:
    """The parameters of the generated ``job_insert_queued_notify`` for one job.

    As :func:`insert_args`, for the statement that never hands a job off.
    """
    return job_queries.JobInsertQueuedNotifyParams(
        **job_columns(item),
        idempotency_key=item.job.idempotency_key,
        meta=meta,
        channel=channel,
    )


def inserted_job(
    item: PreparedJob,
    row: job_queries.JobInsertNotifyRow | job_queries.JobInsertQueuedNotifyRow,
    meta: dict[str, str] | None,
) -> Job:
    """The Job a single-enqueue statement stored, from the columns it returns.

    Every other column is what was sent (or a default), so the payload and
    meta are not decoded back from the row. A job ``job_insert_notify``
    handed to an idle worker comes back leased to it, as its first attempt.
    """
    now = utc(row.created_at)
    made = job_from_new(item.job, item.payload, utc(row.run_at), now, meta)
    if not isinstance(row, job_queries.JobInsertNotifyRow):
        return made
    if row.lease_owner is None or row.lease_expires_at is None:
        return made
    return job_handed(made, row.lease_owner, utc(row.lease_expires_at))


def run_at_of(job: NewJob, now: datetime) -> datetime:
    """When a job becomes due (UTC), from the database's now (UTC)."""
    if job.run_at is not None:
        return utc(job.run_at)
    return now if job.delay is None else now + job.delay


def keyed_arrays(
    items: Sequence[PreparedJob], now: datetime, meta: dict[str, str] | None = None
) -> job_queries.JobInsertKeyedManyParams:
    """Parallel arrays for ``job_insert_keyed_many`` (``meta``: the batch's trace context)."""
    return job_queries.JobInsertKeyedManyParams(
        ids=[i.job.id for i in items],
        queues=[i.job.queue for i in items],
        types=[i.job.type for i in items],
        payloads=[i.payload for i in items],
        priorities=[i.job.priority for i in items],
        max_attempts=[i.job.max_attempts for i in items],
        backoff_kinds=[BACKOFF_KINDS[i.job.backoff.kind] for i in items],
        backoff_bases=[i.job.backoff.base for i in items],
        backoff_maxes=[i.job.backoff.max for i in items],
        run_ats=[run_at_of(i.job, now) for i in items],
        # Keyed items only: never None here (the same `or ""` as the read-back).
        idempotency_keys=[i.job.idempotency_key or "" for i in items],
        created_at=now,
        meta=meta,
    )


def check_replay(item: PreparedJob, stored: Job) -> Job:
    """Return ``stored`` when ``item`` replays it; raise IdempotencyConflict when it differs.

    Payloads compare as JSON values (key order and whitespace don't matter),
    together with type, priority, max attempts and backoff.
    """
    job = item.job
    same = (
        stored.type == job.type
        and stored.payload == item.payload
        and stored.priority == job.priority
        and stored.max_attempts == job.max_attempts
        and stored.backoff == job.backoff
    )
    if not same:
        raise IdempotencyConflict(job.queue, job.idempotency_key or "", stored.id)
    return stored


def is_plain(job: NewJob) -> bool:
    """Whether a batch inserts ``job`` by COPY: no idempotency key, uniqueness
    policy, dependencies or concurrency key."""
    return (
        job.idempotency_key is None
        and job.unique is None
        and not job.depends_on
        and job.concurrency_key is None
    )


def split_batch(prepared: Sequence[PreparedJob]) -> tuple[list[int], list[int], list[int]]:
    """Indices of the batch's plain jobs (COPY, see :func:`is_plain`), those with an
    idempotency key, and those with a uniqueness policy, dependencies or a
    concurrency key (one statement each, in order)."""
    plain, keyed, unique = [], [], []
    for i, item in enumerate(prepared):
        job = item.job
        if is_plain(job):
            plain.append(i)
        elif job.unique is not None or job.depends_on or job.concurrency_key is not None:
            unique.append(i)
        else:
            keyed.append(i)
    return plain, keyed, unique


def keyed_results(
    prepared: Sequence[PreparedJob],
    chunk: Sequence[int],
    new_ids: set[UUID],
    stored: Sequence[models.Job],
    now: datetime,
    results: list[Job | IdempotencyConflict | None],
    meta: dict[str, str] | None = None,
) -> list[Job]:
    """Fill ``results`` for one chunk of keyed jobs; return the ones actually inserted.

    ``new_ids`` are the ids the keyed insert returned; ``stored`` are the rows
    read back for the others. Each of those is a replay (the stored job) or an
    IdempotencyConflict in its slot.
    """
    stored_by_key = {(r.queue, r.idempotency_key or ""): job_from_row(r) for r in stored}
    inserted: list[Job] = []
    for index in chunk:
        item = prepared[index]
        if item.job.id in new_ids:
            made = job_from_new(item.job, item.payload, run_at_of(item.job, now), now, meta)
            results[index] = made
            inserted.append(made)
            continue
        key = (item.job.queue, item.job.idempotency_key or "")
        existing = stored_by_key.get(key)
        if existing is None:
            raise JobrunError(f"idempotency key {key[1]!r} vanished during enqueue")
        try:
            results[index] = check_replay(item, existing)
        except IdempotencyConflict as conflict:
            results[index] = conflict
    return inserted
