"""psycopg's errors to jobrun's: the one place that interprets a SQLSTATE.

Every statement jobrun runs goes through :func:`map_error` when it fails, so a
caller meets :class:`~jobrun.errors.DatabaseUnavailable` (or ``DatabaseFull``), ``SchemaMissing``,
``CommitTimeout``, ``InvalidJob`` or ``PoolExhausted``, never a driver exception
with a connection string in it.
"""

from __future__ import annotations

import re

import psycopg
import psycopg.errors
from psycopg_pool import PoolTimeout
from psycopg_pool.base import BasePool

from jobrun.errors import (
    CommitTimeout,
    DatabaseFull,
    DatabaseUnavailable,
    InvalidJob,
    JobrunError,
    PoolExhausted,
    SchemaMissing,
)

__all__ = ["map_error"]

# Relations and types of jobrun's migrations: an undefined
# one of these means the database was never migrated, not a bug in a query.
_OWN_OBJECTS = frozenset(
    {
        # tables
        "jobs",
        "job_events",
        "processed_effects",
        "schedules",
        "queues",
        "worker_offers",
        # types
        "job_state",
        "backoff_kind",
        "job_outcome",
        # functions (a database migrated by an older jobrun lacks the newer ones)
        "job_effect_scope",
        "job_effect_key",
        "job_outcome_state",
        "job_backoff_delay",
        "queue_leased_count",
    }
)
_UNDEFINED_NAME = re.compile(r'"(?:[^"]*\.)?([^".]+)" does not exist|function ([a-z_]+)\(')


def map_error(
    exc: BaseException, location: tuple[str, str, str], pool: BasePool | None = None
) -> BaseException:
    """The jobrun error for a psycopg error; anything else is returned unchanged.

    The one place that interprets SQLSTATEs. Connection-level failures become
    DatabaseUnavailable without the connection string; a statement timeout in
    a completion becomes CommitTimeout; CHECK and NOT NULL violations are bad
    input that the Python-side validation did not catch, as is a second job
    with an id already stored (a NewJob given its own id); an undefined table
    or type of jobrun's own is SchemaMissing; a server out of disk space is
    DatabaseFull. A pool timeout while
    ``pool`` (the pool the connection was asked of) has all its connections
    out becomes PoolExhausted.
    """
    if isinstance(exc, JobrunError) or not isinstance(exc, psycopg.Error):
        return exc
    if isinstance(exc, PoolTimeout) and pool is not None:
        # The pool also times out when it cannot open connections at all (server
        # down): only a pool at full size with nothing idle is truly exhausted.
        stats = pool.get_stats()
        if stats.get("pool_size", 0) >= pool.max_size and not stats.get("pool_available", 0):
            host, port, dbname = location
            return PoolExhausted(host, port, dbname, pool.max_size, pool.timeout)
    if isinstance(
        exc,
        psycopg.errors.UndefinedTable
        | psycopg.errors.UndefinedObject
        | psycopg.errors.UndefinedFunction,
    ):
        # Only jobrun's own names: a handler's commit callback may hit a missing
        # table of its own, which is that handler's error, not a missing schema.
        found = _UNDEFINED_NAME.search(exc.diag.message_primary or "")
        if found and (found.group(1) or found.group(2)) in _OWN_OBJECTS:
            return SchemaMissing(location[2])
    if isinstance(exc, psycopg.errors.QueryCanceled):
        reason = exc.diag.message_primary
        return CommitTimeout(f"a completion ran past the commit timeout: {reason}")
    if isinstance(exc, psycopg.errors.UniqueViolation) and exc.diag.constraint_name == "jobs_pkey":
        # Only a NewJob given an explicit id can collide: minted ids are unique.
        detail = exc.diag.message_detail or "a job with that id exists"
        return InvalidJob(f"a job with the same id is already stored: {detail}")
    if isinstance(exc, psycopg.errors.CheckViolation | psycopg.errors.NotNullViolation):
        constraint = exc.diag.constraint_name or exc.diag.column_name or "a constraint"
        return InvalidJob(f"rejected by the database ({constraint}): {exc.diag.message_primary}")
    if isinstance(exc, psycopg.errors.DiskFull):
        host, port, dbname = location
        reason = exc.diag.message_primary or " ".join(str(exc).split())
        return DatabaseFull(host, port, dbname, reason[:300])
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        host, port, dbname = location
        return DatabaseUnavailable(host, port, dbname, " ".join(str(exc).split())[:300])
    return exc
