"""What an enqueue of a job with dependencies sends, shared by the async store and its twin.

A job with ``NewJob.depends_on`` goes in through ``JobInsertDependent``
(one statement: the job, its edges, its event and, when it is queued at
once, its queue's wake-up). The statement decides its first state from its
dependencies as they are then; see migration 00018 for the rest of the
mechanism.
"""

from __future__ import annotations

from typing import Any

from jobrun.domain import Job, JobState
from jobrun.errors import InvalidJob
from jobrun.postgres.convert import job_from_new, utc
from jobrun.postgres.preparing import PreparedJob, job_columns
from jobrun.sqlc import dependencies as dependency_queries

__all__ = ["CANCELLED_BY_DEPENDENCY", "insert_args", "inserted"]

CANCELLED_BY_DEPENDENCY = "cancelled: a job it depends on ended dead or cancelled"
"""The last error of a job its dependency's end cancelled (as the statements write it)."""


def insert_args(
    item: PreparedJob, channel: str, meta: dict[str, str] | None
) -> dependency_queries.JobInsertDependentParams:
    """The parameters of ``job_insert_dependent`` for one prepared job with dependencies."""
    return dependency_queries.JobInsertDependentParams(
        **job_columns(item),
        depends_on=list(item.job.depends_on),
        if_failed=item.job.if_dependency_fails,
        meta=meta,
        channel=channel,
    )


def inserted(item: PreparedJob, row: Any, meta: dict[str, str] | None) -> Job:
    """The Job the statement stored; InvalidJob naming the count when a dependency was unknown."""
    if row is None or row.unknown:
        unknown = row.unknown if row is not None else len(item.job.depends_on)
        raise InvalidJob(
            f"job of type {item.job.type!r} is refused: {unknown} of its depends_on "
            "do not exist (a dependency must be enqueued first)"
        )
    now = utc(row.created_at)
    made = job_from_new(item.job, item.payload, utc(row.run_at), now, meta)
    state = JobState(str(row.state))
    if state is JobState.QUEUED:
        return made
    update: dict[str, Any] = {"state": state}
    if state is JobState.CANCELLED:
        update |= {"finished_at": now, "last_error": CANCELLED_BY_DEPENDENCY}
    return made.model_copy(update=update)
