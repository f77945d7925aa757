"""The synchronous producer: enqueue and inspect jobs from sync code (Django, Flask, scripts).

:class:`SyncProducer` is the producer and operator half of the async
:class:`~jobrun.postgres.store.Store` for code that has no event loop. It runs
the same generated SQL (the sync ``Querier`` classes of :mod:`jobrun.sqlc`)
and the same I/O-free logic (:mod:`jobrun.postgres._base` and
:mod:`jobrun.postgres.convert`): validation, payload models and size limits,
replay versus conflict, batch result assembly, the cancel and retry checks.
Only the moving of rows through a connection is written here, so the two
front ends cannot drift apart in what they accept or return.

``enqueue(job, conn=connection)`` joins the caller's open transaction on a
sync ``psycopg.Connection`` (as a savepoint), so the job and its notification
commit with the caller's own rows or not at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeAlias
from uuid import UUID

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import BaseModel

from jobrun.errors import ConfigurationError, IdempotencyConflict, JobNotFound, JobrunError
from jobrun.job import Job, JobFilter, JobPage, NewJob, QueueDepth
from jobrun.postgres import _base
from jobrun.postgres.convert import depth_from_row, job_from_row, map_error, utc
from jobrun.postgres.pool import database_location, unavailable_error
from jobrun.postgres.store import DEFAULT_NOTIFY_CHANNEL
from jobrun.sqlc import events as event_queries
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import models
from jobrun.sqlc import system as system_queries

__all__ = ["SyncPool", "SyncProducer"]

SyncPool: TypeAlias = "ConnectionPool[psycopg.Connection[TupleRow]]"
"""The sync pool a SyncProducer runs on."""

_COPY_CHUNK = 5_000


def open_sync_pool(url: str, *, max_size: int = 4, connect_timeout: float = 10.0) -> SyncPool:
    """Open and ping a small sync pool on ``url``.

    Raises DatabaseUnavailable (host, port and database, never the password)
    when the server cannot be reached, ConfigurationError for a malformed URL.
    """
    if max_size < 1:
        raise ConfigurationError(f"max_size must be at least 1, not {max_size}")
    database_location(url)  # ConfigurationError for a malformed URL, without echoing it
    try:
        # A direct connection first: libpq's reason beats the pool's bare timeout.
        probe = psycopg.connect(url, connect_timeout=max(1, round(connect_timeout)))
    except psycopg.Error as exc:
        raise unavailable_error(url, str(exc)) from None
    probe.close()
    pool: SyncPool = ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        open=False,
        name="jobrun-sync",
        timeout=connect_timeout,
        check=ConnectionPool.check_connection,
    )
    try:
        pool.open(wait=True, timeout=connect_timeout)
        with pool.connection() as conn:
            system_queries.Querier(conn).database_now()
    except (PoolTimeout, psycopg.Error) as exc:
        pool.close()
        raise unavailable_error(url, str(exc)) from None
    except BaseException:
        pool.close()
        raise
    return pool


class SyncProducer:
    """Enqueue, inspect, cancel and retry jobs from synchronous code.

    Give it a connection string (it opens and later closes a small pool of
    its own) or an open ``psycopg_pool.ConnectionPool`` (which the caller
    keeps and closes). ``notify_channel``, ``payload_models`` and
    ``max_payload_bytes`` mean what they mean on the async Store, and must
    match the workers' settings for notifications to wake them.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        conninfo_or_pool: str | SyncPool,
        *,
        notify_channel: str = DEFAULT_NOTIFY_CHANNEL,
        payload_models: Mapping[str, type[BaseModel]] | None = None,
        max_payload_bytes: int = _base.DEFAULT_MAX_PAYLOAD_BYTES,
        max_pool_size: int = 4,
        connect_timeout: float = 10.0,
    ) -> None:
        if not notify_channel:
            raise ConfigurationError("notify_channel must not be empty")
        if max_payload_bytes < 1:
            raise ConfigurationError("max_payload_bytes must be positive")
        if isinstance(conninfo_or_pool, str):
            self._pool = open_sync_pool(
                conninfo_or_pool, max_size=max_pool_size, connect_timeout=connect_timeout
            )
            self._owns_pool = True
        elif isinstance(conninfo_or_pool, ConnectionPool):
            self._pool = conninfo_or_pool
            self._owns_pool = False
        else:
            raise ConfigurationError(
                "SyncProducer needs a connection string or a psycopg_pool.ConnectionPool"
            )
        self.notify_channel = notify_channel
        self.payload_models: dict[str, type[BaseModel]] = dict(payload_models or {})
        self.max_payload_bytes = max_payload_bytes
        self._location = database_location(str(self._pool.conninfo))

    @property
    def pool(self) -> SyncPool:
        """The pool this producer runs on."""
        return self._pool

    def close(self) -> None:
        """Close the pool if this producer opened it; a pool passed in stays open."""
        if self._owns_pool:
            self._pool.close()

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------

    @contextmanager
    def _with_tx(
        self, conn: psycopg.Connection[Any] | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """One transaction: on ``conn`` (joining the caller's transaction) or the pool.

        How a caller's connection is joined is decided by the same rule as the
        async store's (:func:`jobrun.postgres._base.needs_transaction_block`).
        """
        try:
            if conn is not None:
                if not isinstance(conn, psycopg.Connection):
                    raise ConfigurationError(
                        "conn must be a sync psycopg.Connection; "
                        "use jobrun.postgres.store.Store with an AsyncConnection"
                    )
                if _base.needs_transaction_block(conn):
                    with conn.transaction():
                        yield conn
                else:
                    yield conn
                return
            with self._pool.connection() as pooled, pooled.transaction():
                yield pooled
        except psycopg.Error as exc:
            raise map_error(exc, self._location, self._pool) from exc

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for a single statement."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise map_error(exc, self._location, self._pool) from exc

    # -- enqueue ------------------------------------------------------------------

    def enqueue(self, job: NewJob, *, conn: psycopg.Connection[Any] | None = None) -> Job:
        """Insert ``job``, or return the stored job when it replays an idempotency key.

        A replay (same key, same body) returns the stored job, whose ``id``
        differs from ``job.id``; a different body raises IdempotencyConflict.
        An invalid or oversize payload raises InvalidJob before anything is
        written. With ``conn`` the job joins the caller's transaction and
        commits (and notifies) with it or not at all.
        """
        (item,) = _base.prepare_jobs([job], self.payload_models, self.max_payload_bytes)
        with self._with_tx(conn) as tx:
            queries = job_queries.Querier(tx)
            row = queries.job_insert(params=_base.insert_args(item))
            if row is None:
                stored = queries.job_get_by_idempotency_key(
                    queue=job.queue, idempotency_key=job.idempotency_key or ""
                )
                if stored is None:
                    # The conflicting row was purged between our insert and read: retry once.
                    row = queries.job_insert(params=_base.insert_args(item))
                    if row is None:
                        raise JobrunError(f"could not insert or read job key {job.idempotency_key}")
                else:
                    return _base.check_replay(item, job_from_row(stored))
            queries.job_notify(channel=self.notify_channel, queue=job.queue)
        return job_from_row(row)

    def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: psycopg.Connection[Any] | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Insert many jobs in one transaction; one result per input, in order.

        Every payload is validated before anything is written. A keyed job
        that replays a stored one returns it; one whose body differs is an
        IdempotencyConflict in its slot while the rest are inserted.
        """
        if not jobs:
            return []
        prepared = _base.prepare_jobs(jobs, self.payload_models, self.max_payload_bytes)
        results: list[Job | IdempotencyConflict | None] = [None] * len(prepared)
        with self._with_tx(conn) as tx:
            db_now = system_queries.Querier(tx).database_now()
            assert db_now is not None
            now = utc(db_now)
            queries = job_queries.Querier(tx)
            events = event_queries.Querier(tx)
            queues: set[str] = set()
            plain, keyed = _base.split_batch(prepared)
            for start in range(0, len(plain), _COPY_CHUNK):
                rows = []
                ids = []
                for index in plain[start : start + _COPY_CHUNK]:
                    row, made = _base.job_copy_row(prepared[index], now)
                    rows.append(row)
                    ids.append(made.id)
                    results[index] = made
                    queues.add(made.queue)
                queries.job_insert_copy(rows=rows)
                events.event_insert_enqueued_many(job_ids=ids, at=now)
            for start in range(0, len(keyed), _COPY_CHUNK):
                chunk = keyed[start : start + _COPY_CHUNK]
                items = [prepared[i] for i in chunk]
                new_ids = set(queries.job_insert_keyed_many(params=_base.keyed_arrays(items, now)))
                missing = [i for i in chunk if prepared[i].job.id not in new_ids]
                stored: list[models.Job] = []
                if missing:
                    stored = queries.job_get_by_idempotency_keys(
                        queues=[prepared[i].job.queue for i in missing],
                        idempotency_keys=[prepared[i].job.idempotency_key or "" for i in missing],
                    )
                inserted = _base.keyed_results(prepared, chunk, new_ids, stored, now, results)
                if inserted:
                    events.event_insert_enqueued_many(job_ids=[j.id for j in inserted], at=now)
                    queues.update(j.queue for j in inserted)
            for queue in sorted(queues):
                queries.job_notify(channel=self.notify_channel, queue=queue)
        return [r for r in results if r is not None]

    # -- operators ----------------------------------------------------------------

    def get(self, job_id: UUID) -> Job:
        """One job by id; JobNotFound when there is none."""
        with self._connection() as conn:
            row = job_queries.Querier(conn).job_get(id=job_id)
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    def list_jobs(
        self, filter: JobFilter | None = None, *, limit: int = 50, cursor: UUID | None = None
    ) -> JobPage:
        """A page of jobs matching ``filter``, newest first; pass ``next_cursor`` for more."""
        args = _base.list_args(filter, limit, cursor)
        with self._connection() as conn:
            rows = job_queries.Querier(conn).job_list(params=args)
        return _base.page_of(rows, limit)

    def cancel(self, job_id: UUID) -> Job:
        """Cancel a queued job now, or ask the worker holding a leased one to stop it.

        A finished job raises InvalidTransition; an unknown id JobNotFound.
        """
        with self._with_tx() as tx:
            queries = job_queries.Querier(tx)
            current = queries.job_lock(id=job_id)
            if current is None:
                raise JobNotFound(job_id)
            action = _base.cancel_action(job_id, current.state, current.cancel_requested)
            if action is _base.CancelAction.UNCHANGED:
                return job_from_row(current)
            if action is _base.CancelAction.CANCEL_QUEUED:
                row = queries.job_cancel_queued(id=job_id, now=None)
            else:
                row = queries.job_request_cancel(id=job_id)
            assert row is not None  # locked above
        return job_from_row(row)

    def retry(self, job_id: UUID) -> Job:
        """Put a dead or cancelled job back in its queue, due now, and wake a worker.

        Any other state raises InvalidTransition; an unknown id JobNotFound.
        """
        with self._with_tx() as tx:
            queries = job_queries.Querier(tx)
            current = queries.job_lock(id=job_id)
            if current is None:
                raise JobNotFound(job_id)
            _base.check_retryable(job_id, current.state)
            row = queries.job_retry(id=job_id, from_state=current.state, now=None)
            assert row is not None  # locked above
            queries.job_notify(channel=self.notify_channel, queue=row.queue)
        return job_from_row(row)

    def depth(self) -> list[QueueDepth]:
        """Job counts per queue and state, with the oldest creation time of each."""
        with self._connection() as conn:
            rows = job_queries.Querier(conn).job_depth()
        return [depth_from_row(r.queue, r.state, r.count, r.oldest_created_at) for r in rows]
