"""The parts of enqueue that do no I/O, shared by the async store and the sync producer.

Validation, parameter building and the replay-versus-conflict decision are
written once here; :mod:`jobrun.postgres.store` and
:mod:`jobrun.postgres.sync` only move the results through a connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, ValidationError

from jobrun.errors import IdempotencyConflict, InvalidJob
from jobrun.job import BackoffKind, Job, NewJob
from jobrun.postgres.convert import encode_payload, job_from_new, normal_json, utc
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import models

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "PreparedJob",
    "check_replay",
    "job_copy_row",
    "keyed_arrays",
    "prepare_jobs",
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

    def jsonb(self) -> Jsonb:
        """The payload for COPY, reusing the text already encoded for validation."""
        text = self.text
        return Jsonb(self.payload, dumps=lambda _value: text)


def _validate_model(job: NewJob, model: type[BaseModel]) -> Any:
    try:
        return model.model_validate(job.payload).model_dump(mode="json")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise InvalidJob(
            f"payload of job type {job.type!r} does not match {model.__name__}: {problems}"
        ) from None


def prepare_jobs(
    jobs: Sequence[NewJob],
    payload_models: Mapping[str, type[BaseModel]],
    max_payload_bytes: int,
) -> list[PreparedJob]:
    """Validate every job before anything is written; the first bad one raises InvalidJob."""
    prepared = []
    for job in jobs:
        model = payload_models.get(job.type)
        payload = job.payload if model is None else _validate_model(job, model)
        text = encode_payload(job.type, payload, max_payload_bytes)
        # Keyed jobs may be compared with a stored payload, so they need the
        # value PostgreSQL will hand back; NewJob already holds a JSON value.
        if model is not None or job.idempotency_key is not None:
            payload = normal_json(text)
        prepared.append(PreparedJob(job, payload, text))
    return prepared


def insert_args(item: PreparedJob) -> dict[str, Any]:
    """Keyword arguments of the generated ``job_insert`` for one job."""
    job = item.job
    return {
        "id": job.id,
        "queue": job.queue,
        "type": job.type,
        "payload": item.payload,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "backoff_kind": BACKOFF_KINDS[job.backoff.kind],
        "backoff_base": job.backoff.base,
        "backoff_max": job.backoff.max,
        "run_at": job.run_at,
        "delay": job.delay or _ZERO,
        "idempotency_key": job.idempotency_key,
    }


def run_at_of(job: NewJob, now: datetime) -> datetime:
    """When a job becomes due (UTC), from the database's now (UTC)."""
    if job.run_at is not None:
        return utc(job.run_at)
    return now if job.delay is None else now + job.delay


def job_copy_row(item: PreparedJob, now: datetime) -> tuple[job_queries.JobInsertCopyParams, Job]:
    """The COPY row for a job of a batch, and the Job it becomes."""
    job = item.job
    run_at = run_at_of(job, now)
    row = job_queries.JobInsertCopyParams(
        id=job.id,
        queue=job.queue,
        type=job.type,
        payload=item.jsonb(),
        priority=job.priority,
        max_attempts=job.max_attempts,
        backoff_kind=BACKOFF_KINDS[job.backoff.kind],
        backoff_base=job.backoff.base,
        backoff_max=job.backoff.max,
        run_at=run_at,
        idempotency_key=job.idempotency_key,
        created_at=now,
        updated_at=now,
    )
    return row, job_from_new(job, item.payload, run_at, now)


def keyed_arrays(items: Sequence[PreparedJob], now: datetime) -> dict[str, Any]:
    """Parallel arrays for ``job_insert_keyed_many``."""
    return {
        "ids": [i.job.id for i in items],
        "queues": [i.job.queue for i in items],
        "types": [i.job.type for i in items],
        "payloads": [i.payload for i in items],
        "priorities": [i.job.priority for i in items],
        "max_attempts": [i.job.max_attempts for i in items],
        "backoff_kinds": [BACKOFF_KINDS[i.job.backoff.kind] for i in items],
        "backoff_bases": [i.job.backoff.base for i in items],
        "backoff_maxes": [i.job.backoff.max for i in items],
        "run_ats": [run_at_of(i.job, now) for i in items],
        "idempotency_keys": [i.job.idempotency_key for i in items],
        "created_at": now,
    }


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
