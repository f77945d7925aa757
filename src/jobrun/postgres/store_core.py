"""The Store's core: its settings, its pool, and the one way each transaction opens.

Every group of the Store's methods (:mod:`jobrun.postgres.enqueueing`, ...) derives
from :class:`StoreCore`, which :class:`jobrun.postgres.store.Store` composes.
"""

from __future__ import annotations

import asyncio  # sync: skip
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, cast
from uuid import UUID

import psycopg
from pydantic import BaseModel

from jobrun.domain import (
    DEFAULT_NOTIFY_CHANNEL,
    EventMode,
    ReplicaLag,
    notify_channel_problem,
)
from jobrun.errors import (
    ConfigurationError,
    JobrunError,
)
from jobrun.outages import is_outage
from jobrun.postgres import _base, holders, keyed_jobs, preparing
from jobrun.postgres.convert import (
    utc,
)
from jobrun.postgres.copyrows import SIGNATURE, TRAILER
from jobrun.postgres.errors_map import map_error
from jobrun.postgres.offer_hints import OfferHints
from jobrun.postgres.one_exchange import AsyncOneExchangeConnection
from jobrun.postgres.pool import Pool, database_location
from jobrun.sqlc import concurrency as concurrency_queries
from jobrun.sqlc import locks as lock_queries
from jobrun.sqlc import system as system_queries
from jobrun.telemetry.hooks import Observer

__all__ = ["DEFAULT_NOTIFY_CHANNEL", "StoreCore"]

log = logging.getLogger("jobrun.store")

DEFAULT_RETRY_JITTER = 0.1
"""A failed job's wait is its backoff spread by up to 10% either way (never past its max)."""
MAX_RETRY_JITTER = 0.5


COPY_CHUNK = 5_000
COPY_SLICE = 128
"""Rows encoded and sent at a time within one COPY (see :func:`copy_stream`)."""
# The claim statement takes an offer lifetime even when it offers nothing.
NO_OFFER_TTL = timedelta(0)


@asynccontextmanager
async def copy_stream(
    tx: psycopg.AsyncConnection[Any], statement: str
) -> AsyncIterator[psycopg.AsyncCopy]:
    """Run the generated binary COPY ``statement``; the caller writes its rows to the copy yielded.

    Each write sends its rows on (libpq writes out what it holds past 8 KiB),
    so the server inserts them while the caller encodes the next; the
    stream's signature and trailer are written here.
    """
    async with tx.cursor() as cur, cur.copy(cast(Any, statement)) as copy:
        await copy.write(SIGNATURE)
        yield copy
        await copy.write(TRAILER)


async def copy_in(tx: psycopg.AsyncConnection[Any], statement: str, data: bytes) -> None:
    """Run the generated COPY ``statement`` with ``data``, a whole binary COPY stream."""
    async with tx.cursor() as cur, cur.copy(cast(Any, statement)) as copy:
        await copy.write(data)


def one_exchange(conn: psycopg.AsyncConnection[Any]) -> psycopg.AsyncConnection[Any]:
    """``conn`` (pooled, autocommit) as the generated querier takes it, run without a cursor."""
    return cast(psycopg.AsyncConnection[Any], AsyncOneExchangeConnection(conn))


class StoreCore:
    """Settings, pool and transaction helpers shared by every group of the Store's methods.

    Its constructor is :class:`jobrun.postgres.store.Store`'s: see there for the settings.
    """

    def __init__(
        self,
        pool: Pool,
        *,
        event_mode: EventMode | str = EventMode.ALL,
        commit_timeout: timedelta = timedelta(seconds=30),
        retry_jitter: float = DEFAULT_RETRY_JITTER,
        notify_channel: str = DEFAULT_NOTIFY_CHANNEL,
        payload_models: Mapping[str, type[BaseModel]] | None = None,
        max_payload_bytes: int = preparing.DEFAULT_MAX_PAYLOAD_BYTES,
        observer: Observer | None = None,
        job_types: Iterable[str] | None = None,
        gc_young_threshold: int | None = None,
    ) -> None:
        if commit_timeout <= timedelta(0):
            raise ConfigurationError("commit_timeout must be positive")
        if not 0 <= retry_jitter <= MAX_RETRY_JITTER:
            raise ConfigurationError(
                f"retry_jitter must be between 0 and {MAX_RETRY_JITTER}, got {retry_jitter}"
            )
        channel_problem = notify_channel_problem(notify_channel)
        if channel_problem is not None:
            raise ConfigurationError(channel_problem)
        if max_payload_bytes < 1:
            raise ConfigurationError("max_payload_bytes must be positive")
        self._pool = pool
        self._pid = os.getpid()
        self.event_mode = EventMode(event_mode)
        self.commit_timeout = commit_timeout
        self.retry_jitter = retry_jitter
        self.notify_channel = notify_channel
        self.payload_models: dict[str, type[BaseModel]] = dict(payload_models or {})
        self.job_types: frozenset[str] | None = (
            frozenset(job_types) if job_types is not None else None
        )
        self.max_payload_bytes = max_payload_bytes
        self.observer = observer
        """Told of every job enqueued through this store (metrics); None: nobody."""
        self.gc_young_threshold = gc_young_threshold
        """The collector's young threshold while a batch goes in; None: left alone."""
        self._timeout_setting = f"{max(1, int(commit_timeout.total_seconds() * 1000))}ms"
        self._location = database_location(str(pool.conninfo))
        self._pool_check: Any = None
        self._offer_hints = OfferHints()

    @property
    def pool(self) -> Pool:
        """The pool this store runs on."""
        return self._pool

    # -- plumbing -----------------------------------------------------------------

    def _forked(self) -> None:
        """Called when the pool is about to be used in a fork of the process that opened it.

        Refuses: the pool's connections belong to the parent too. SyncProducer,
        which knows how its own pool was opened, opens a new one instead.
        """
        raise _base.forked_pool_error(self._pid)

    def _failed(self, exc: psycopg.Error) -> BaseException:
        """The jobrun error for ``exc``; when the server was lost, the idle connections are tested.

        A server that restarts or fails over breaks every connection the pool
        holds idle, and each would fail once more when next borrowed: after
        the outage had ended, one failure per connection. The pool's
        ``check()`` tests them all now and replaces the broken ones, so the
        outage ends once (:mod:`jobrun.outages`).
        """
        mapped = map_error(exc, self._location, self._pool)
        if is_outage(mapped):
            if True:  # sync: else
                running = self._pool_check
                if running is None or running.done():
                    check = asyncio.get_running_loop().create_task(self._pool.check())
                    check.add_done_callback(_ignore_result)
                    self._pool_check = check
            else:
                # A sync pool's check would block the caller's thread on every
                # idle connection; its callers see each failure themselves.
                pass
        return mapped

    @asynccontextmanager
    async def _with_tx(
        self, conn: Any | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The one way a transaction opens: on ``conn`` (joining its transaction) or the pool.

        ``conn`` is the caller's transaction holder: a psycopg connection, or
        SQLAlchemy's or Django's, unwrapped by :mod:`jobrun.postgres.holders`.

        On a caller's connection that already has a transaction open this is a
        savepoint inside it, so the caller's commit or rollback decides.
        """
        try:
            if conn is not None:
                held = await holders.unwrap_async(conn)
                if _base.needs_transaction_block(held):
                    # Autocommit: our own atomic transaction. Inside the
                    # caller's transaction: a savepoint, so a failure here
                    # leaves their transaction usable.
                    async with held.transaction():
                        yield held
                else:
                    # psycopg's implicit transaction has not begun yet: our
                    # first statement begins it and the caller commits it.
                    yield held
                return
            if self._pid != os.getpid():
                self._forked()
            async with self._pool.connection() as pooled, pooled.transaction():
                yield pooled
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection for a single statement (its own implicit transaction).

        On jobrun's pools (autocommit) the statement commits as it ends, and
        the commit ``pool.connection()`` sends on exit would do nothing at the
        cost of a pass through psycopg's wait machinery, so the connection is
        only borrowed and returned. A caller's pool without autocommit opens
        a transaction on the first statement: the connection's own block
        commits it (or rolls it back on an error), as ``pool.connection()``
        does, before it goes back.
        """
        if self._pid != os.getpid():
            self._forked()
        try:
            conn = await self._pool.getconn()
            try:
                if conn.autocommit:
                    yield conn
                else:
                    async with conn:
                        yield conn
            finally:
                await self._pool.putconn(conn)
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    async def _admit_keyed(
        self, tx: psycopg.AsyncConnection[Any], keys: Iterable[str]
    ) -> set[UUID]:
        """Admit the waiting jobs of concurrency ``keys`` that have room, in ``tx``; their ids.

        ``tx`` must be a transaction: the keys' locks are taken first, and the
        admission, a statement after it, counts what every earlier holder of
        a lock committed.
        """
        wanted = sorted(set(keys))
        if not wanted:
            return set()
        await lock_queries.AsyncQuerier(tx).key_lock_many(ids=keyed_jobs.lock_ids(wanted))
        admitted = await concurrency_queries.AsyncQuerier(tx).job_admit_keyed(
            keys=wanted, channel=self.notify_channel
        )
        return set(admitted)

    async def _admit_after_completion(self, keys: set[str]) -> None:
        """Admit for the keys whose slots a completion freed, in a transaction of its own.

        The completion has committed: a failure here is logged and left to
        the maintenance leader's pass, which admits for every key that has
        waiting jobs.
        """
        try:
            async with self._with_tx() as tx:
                await self._admit_keyed(tx, keys)
        except Exception as exc:
            # During an outage the parts that noticed it say so once; this is detail.
            level = logging.DEBUG if is_outage(exc) else logging.WARNING
            log.log(
                level, "could not admit the next jobs of %d concurrency keys: %s", len(keys), exc
            )

    async def replica_lag(self) -> ReplicaLag | None:
        """How far this store's server is behind its primary; None when it is a primary.

        For a store on ``read_url``: the dashboard and the CLI show it beside
        what they read there.
        """
        async with self._connection() as conn:
            row = await system_queries.AsyncQuerier(conn).replica_lag()
        if row is None or not row.standby:
            return None
        if row.replayed_all:
            return ReplicaLag(timedelta(0))
        if not row.replayed_any:
            return ReplicaLag(None)
        return ReplicaLag(timedelta(seconds=max(0.0, row.seconds_since_replay)))

    async def now(self) -> datetime:
        """The database clock, in UTC."""
        async with self._connection() as conn:
            now = await system_queries.AsyncQuerier(conn).database_now()
        if now is None:  # pragma: no cover - now() always returns a row
            raise JobrunError("the database returned no time")
        return utc(now)


def _ignore_result(task: Any) -> None:
    """A pool check's end: a closed pool or a server still down is nothing to report."""
    if not task.cancelled():
        task.exception()
