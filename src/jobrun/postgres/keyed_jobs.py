"""What an enqueue of a job with a concurrency key sends, shared by the async store and its twin.

A job with ``NewJob.concurrency_key`` goes in through ``JobInsertKeyed``,
waiting, while its transaction holds its key's lock; ``JobAdmitKeyed``, a
statement after the lock was taken, then admits the key's oldest waiting
jobs while the key has room (see migration 00020 for the mechanism).
"""

from __future__ import annotations

from collections.abc import Iterable

from jobrun.domain import key_lock_id
from jobrun.errors import InvalidJob
from jobrun.postgres.preparing import PreparedJob, job_columns
from jobrun.sqlc import concurrency as concurrency_queries

__all__ = ["insert_args", "lock_ids", "no_limit"]

_LOCK_PREFIX = "jobrun.concurrency_key:"


def lock_ids(keys: Iterable[str]) -> list[int]:
    """The advisory lock ids of concurrency ``keys``, lowest first (the one global order).

    A key's lock is an application key lock (``ctx.lock``'s kind) under a
    prefix of jobrun's own, so admission never waits on a handler's locks.
    """
    return sorted({key_lock_id(_LOCK_PREFIX + key) for key in keys})


def no_limit(item: PreparedJob) -> InvalidJob:
    """The refusal of a keyed job that has no limit: none of its own, its type's or its queue's."""
    job = item.job
    return InvalidJob(
        f"job of type {job.type!r} has concurrency_key {job.concurrency_key!r} but no "
        "concurrency_limit: give one, declare it on the type's handler, or set one on "
        f"queue {job.queue!r} (jobrun queues limit QUEUE --per-key N)"
    )


def insert_args(
    item: PreparedJob, meta: dict[str, str] | None
) -> concurrency_queries.JobInsertKeyedParams:
    """The parameters of ``job_insert_keyed`` for one prepared job with a concurrency key."""
    job = item.job
    assert job.concurrency_key is not None
    return concurrency_queries.JobInsertKeyedParams(
        **job_columns(item),
        meta=meta,
        key=job.concurrency_key,
        key_limit=job.concurrency_limit,
    )
