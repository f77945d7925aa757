"""Open the connection pool every jobrun component shares, with production limits.

The pool is sized for the worker: one connection per concurrent job plus a
margin for the heartbeat, the reaper, the scheduler and operator commands
(``worker_concurrency + 8``). It is pinged when it opens, so a wrong URL fails at
start-up with :class:`~jobrun.errors.DatabaseUnavailable` naming host, port and
database, never later inside a job, and never with the password in the message.

The synchronous store (:class:`~jobrun.postgres.store_sync.SyncStore`) runs on
:func:`open_sync_pool`: the same connection settings and checks, on psycopg's
sync pool, sized by the caller (a sync service has no worker concurrency).
"""

from __future__ import annotations

import os
from typing import Any, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from jobrun.errors import ConfigurationError, DatabaseUnavailable
from jobrun.sqlc import system as system_queries

__all__ = [
    "POOL_HEADROOM",
    "Pool",
    "SyncPool",
    "database_location",
    "open_pool",
    "open_sync_pool",
    "resolve_database_url",
    "unavailable_error",
]

Pool: TypeAlias = "AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]]"
"""The pool type jobrun hands around; the CLI and runtime name it without importing psycopg."""

SyncPool: TypeAlias = "ConnectionPool[psycopg.Connection[TupleRow]]"
"""The pool the synchronous store runs on."""

POOL_HEADROOM = 8
"""Connections beyond the worker's concurrency: heartbeat, reaper, scheduler, operators."""


def _parse(url: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        # The parser's message can quote the URL, password included: say only what failed.
        raise ConfigurationError(
            "the database URL is not a valid PostgreSQL connection string"
        ) from None


def _with_utc(options: object) -> str:
    return f"{options or ''} -c timezone=UTC".strip()


def _connection_kwargs(url: str) -> dict[str, Any]:
    # Autocommit: a single statement is its own transaction in one round trip;
    # the store opens explicit transactions where it needs several.
    # Session time zone UTC: timestamps arrive already in UTC, so the clock
    # rule costs no per-value conversion (the caller's own options are kept).
    return {"autocommit": True, "options": _with_utc(_parse(url).get("options"))}


def database_location(url: str) -> tuple[str, str, str]:
    """(host, port, dbname) of a connection string, with libpq's defaults filled in.

    Safe to print: it never carries the user's password.
    """
    params = _parse(url)
    host = str(params.get("host") or os.environ.get("PGHOST") or "localhost")
    port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
    user = params.get("user") or os.environ.get("PGUSER") or ""
    dbname = str(params.get("dbname") or os.environ.get("PGDATABASE") or user or "postgres")
    return host, port, dbname


def unavailable_error(url: str, reason: str) -> DatabaseUnavailable:
    """DatabaseUnavailable for ``url``: host, port and database, the password scrubbed."""
    host, port, dbname = database_location(url)
    password = _parse(url).get("password") or os.environ.get("PGPASSWORD")
    clean = " ".join(reason.split())
    if password:
        clean = clean.replace(str(password), "***")
    return DatabaseUnavailable(host, port, dbname, clean or "connection failed")


async def open_pool(
    url: str,
    *,
    worker_concurrency: int = 10,
    min_size: int = 1,
    connect_timeout: float = 10.0,
    name: str = "jobrun",
) -> Pool:
    """Open and ping a pool of ``worker_concurrency + 8`` connections to ``url``.

    Raises DatabaseUnavailable when the server cannot be reached or refuses the
    login, ConfigurationError for a malformed URL or a concurrency below 1. The
    caller closes the pool (``await pool.close()`` or ``async with pool``).
    """
    if worker_concurrency < 1:
        raise ConfigurationError(f"worker_concurrency must be at least 1, not {worker_concurrency}")
    _parse(url)
    max_size = worker_concurrency + POOL_HEADROOM
    # A first direct connection gives libpq's own reason when the server is not there;
    # the pool would only report a timeout.
    try:
        probe = await psycopg.AsyncConnection.connect(
            url, connect_timeout=max(1, round(connect_timeout)), autocommit=True
        )
    except psycopg.Error as exc:
        raise unavailable_error(url, str(exc)) from None
    await probe.close()

    pool: Pool = AsyncConnectionPool(
        url,
        min_size=min(min_size, max_size),
        max_size=max_size,
        open=False,
        name=name,
        timeout=connect_timeout,
        # No per-borrow check: it would add a round trip to every claim and
        # completion. A connection the server dropped fails its next statement,
        # the pool discards it, and the caller's loop retries.
        kwargs=_connection_kwargs(url),
    )
    try:
        await pool.open(wait=True, timeout=connect_timeout)
        async with pool.connection() as conn:
            await system_queries.AsyncQuerier(conn).database_now()
    except (PoolTimeout, psycopg.Error) as exc:
        await pool.close()
        raise unavailable_error(url, str(exc)) from None
    except BaseException:
        await pool.close()
        raise
    return pool


def open_sync_pool(url: str, *, max_size: int = 4, connect_timeout: float = 10.0) -> SyncPool:
    """Open and ping a sync pool of up to ``max_size`` connections to ``url``.

    The same connection settings and errors as :func:`open_pool`:
    DatabaseUnavailable (host, port and database, never the password) when
    the server cannot be reached, ConfigurationError for a malformed URL or a
    size below 1. The caller closes the pool (``pool.close()`` or ``with pool``).
    """
    if max_size < 1:
        raise ConfigurationError(f"max_size must be at least 1, not {max_size}")
    _parse(url)
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
        # A sync producer mostly idles between requests, and has no loop that
        # retries: check each borrowed connection so one the server dropped
        # is replaced instead of failing the caller's request.
        check=ConnectionPool.check_connection,
        kwargs=_connection_kwargs(url),
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


def resolve_database_url(explicit: str | None) -> str:
    """The database to use: ``explicit``, else ``$JOBRUN_DATABASE_URL``, else the embedded one.

    The embedded server needs the ``jobrun[embedded]`` extra; without it this
    raises ConfigurationError saying so.
    """
    if explicit:
        return explicit
    from_env = os.environ.get("JOBRUN_DATABASE_URL")
    if from_env:
        return from_env
    from jobrun.postgres.embedded import embedded_database_url

    return embedded_database_url()
