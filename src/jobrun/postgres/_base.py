"""The parts of the store that do no I/O, shared by the async store and its sync twin.

Validation, parameter building, the replay-versus-conflict decision, the
batch's result assembly and the operators' state checks are written once
here; :mod:`jobrun.postgres.store` (and :mod:`jobrun.postgres.store_sync`,
generated from it) only move the results through a connection.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

from psycopg import BaseConnection
from psycopg.pq import TransactionStatus

from jobrun.domain import (
    INDEXED_STATES,
    JobFilter,
    JobPage,
    JobState,
    duration_problem,
    id_range,
    queue_limits_problem,
    queue_name_problem,
)
from jobrun.errors import (
    ConfigurationError,
    UsageError,
)
from jobrun.postgres.convert import (
    job_from_row,
    job_from_search_row,
)
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import models
from jobrun.sqlc import queues as queue_queries
from jobrun.sqlc import search as search_queries

__all__ = [
    "FINISHED_STATES",
    "SearchRow",
    "check_batch_limit",
    "check_older_than",
    "check_queue_name",
    "limits_args",
    "list_args",
    "needs_transaction_block",
    "page_of",
    "search_args",
    "search_page",
]


FINISHED_STATES = frozenset({JobState.SUCCEEDED, JobState.CANCELLED, JobState.DEAD})
"""The terminal states: the jobs retention may purge."""


def check_batch_limit(limit: int) -> None:
    """Raise ConfigurationError unless ``limit`` is a usable batch size (at least 1)."""
    if limit < 1:
        raise ConfigurationError(f"batch limit must be at least 1, got {limit}")


def check_older_than(older_than: timedelta) -> None:
    """Raise ConfigurationError unless ``older_than`` is an age purge can use.

    Database now minus a negative age is in the future (everything would go),
    and minus an age of millennia is out of timestamp range.
    """
    problem = duration_problem("older_than", older_than)
    if problem is not None:
        raise ConfigurationError(problem)


def check_queue_name(name: str) -> None:
    """Raise ConfigurationError unless ``name`` can name a queue."""
    problem = queue_name_problem(name)
    if problem is not None:
        raise ConfigurationError(problem)


def bounded_actor(actor: str | None) -> str | None:
    """``actor`` cut to the 255 characters a ``changed_by`` column holds (migration 00007)."""
    return actor[:255] if actor is not None else None


def limits_args(
    name: str,
    concurrency: int | None,
    rate: tuple[int, timedelta] | None,
    actor: str | None = None,
    key_limit: int | None = None,
) -> queue_queries.QueueSetLimitsParams:
    """The checked arguments of QueueSetLimits; ConfigurationError for bad limits."""
    check_queue_name(name)
    problem = queue_limits_problem(concurrency, rate, key_limit)
    if problem is not None:
        raise ConfigurationError(problem)
    return queue_queries.QueueSetLimitsParams(
        name=name,
        concurrency_limit=concurrency,
        rate_limit=rate[0] if rate is not None else None,
        rate_interval=rate[1] if rate is not None else None,
        set_concurrency=concurrency is not None,
        set_rate=rate is not None,
        key_limit=key_limit,
        set_key_limit=key_limit is not None,
        actor=bounded_actor(actor),
    )


def list_args(
    filter: JobFilter | None, limit: int, cursor: UUID | None
) -> job_queries.JobListParams:
    """The parameters of the generated ``job_list`` (one row more than a page)."""
    if limit < 1:
        raise ConfigurationError("limit must be at least 1")
    f = filter or JobFilter()
    return job_queries.JobListParams(
        queue=f.queue,
        state=None if f.state is None else models.JobState(f.state.value),
        type=f.type,
        created_after=f.created_after,
        created_before=f.created_before,
        cursor=cursor,
        max_jobs=limit + 1,
    )


SearchRow = search_queries.JobSearchRow | search_queries.JobSearchInStateRow
"""A row of a search: a whole job, how far into the walk it lay, and whether it matched."""


def search_args(
    f: JobFilter, limit: int, cursor: UUID | None, search_rows: int
) -> search_queries.JobSearchParams | search_queries.JobSearchInStateParams:
    """The parameters of the search query that serves ``f`` (one row more than a page)."""
    if limit < 1:
        raise ConfigurationError("limit must be at least 1")
    if search_rows < 1:
        raise ConfigurationError("search_rows must be at least 1")
    low, high = id_range(f.id_prefix, cursor)
    common: dict[str, Any] = {
        "queue": f.queue,
        "type": f.type,
        "created_after": f.created_after,
        "created_before": f.created_before,
        "id_suffix": f.id_suffix,
        "error": f.error,
        "payload_json": f.payload,
        "low": low,
        "high": high,
        "max_walk": search_rows,
        "max_jobs": limit + 1,
    }
    if f.state is None:
        return search_queries.JobSearchParams(state=None, **common)
    state = models.JobState(f.state.value)
    # jobs_dead_cancelled_idx holds these states in id order: walk only their jobs.
    if f.state.value in INDEXED_STATES:
        return search_queries.JobSearchInStateParams(state=state, **common)
    return search_queries.JobSearchParams(state=state, **common)


def search_page(rows: Sequence[SearchRow], limit: int, search_rows: int) -> JobPage:
    """A page from a search's rows: its matches, and where it stopped.

    One match more than the page: the page is full, and the next continues
    after its last job. Otherwise a last row at the walk's bound (matched or
    not) means the walk was cut there: the next call continues below it.
    """
    matched = [row for row in rows if row.matched]
    if len(matched) > limit:
        jobs = [job_from_search_row(row) for row in matched[:limit]]
        return JobPage(jobs=jobs, next_cursor=jobs[-1].id)
    jobs = [job_from_search_row(row) for row in matched]
    if rows and rows[-1].walked == search_rows:
        return JobPage(jobs=jobs, next_cursor=rows[-1].id, scan_cut=True)
    return JobPage(jobs=jobs, next_cursor=None)


def page_of(rows: Sequence[models.Job], limit: int) -> JobPage:
    """A page from ``job_list``'s rows: a next cursor only when there was one row more."""
    jobs = [job_from_row(r) for r in rows[:limit]]
    next_cursor = jobs[-1].id if len(rows) > limit else None
    return JobPage(jobs=jobs, next_cursor=next_cursor)


def needs_transaction_block(conn: BaseConnection[Any]) -> bool:
    """Whether work on a caller's connection must be wrapped in ``conn.transaction()``.

    On an autocommit connection the block is our own atomic transaction;
    inside the caller's open transaction it is a savepoint, so a failure
    leaves their transaction usable. On a non-autocommit connection whose
    implicit transaction has not begun, a block would begin *and commit* a
    transaction of its own, so we run bare: our first statement begins the
    caller's transaction and the caller's commit or rollback decides.
    """
    return conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE


def forked_pool_error(opened_in: int) -> UsageError:
    """The error for a store whose pool was opened in process ``opened_in``, used in a fork of it.

    The child's pooled connections are the parent's sockets: two processes
    writing to one session interleave their statements and read each other's
    results, or wait forever for a reply the other one took.
    """
    return UsageError(
        f"this store's pool was opened in process {opened_in} and is used in process "
        f"{os.getpid()}, a fork of it: pooled connections cannot cross a fork. Open the "
        "store or its pool in the process that uses it (after the fork: gunicorn's "
        "post_fork hook, or on first use), or give SyncProducer a connection string, "
        "which opens a pool of its own in each process"
    )
