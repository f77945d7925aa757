"""Open the connection pool every jobrun component shares, with production limits.

The pool is sized for the worker, not one connection per job: a handler holds
no connection while it runs (its commit callback runs in the completer's
batch transaction), so a worker needs a few for its own loops (claim, two
completion batches in flight, heartbeat, reaper, scheduler) and some for what
handlers do through the client, such as enqueueing follow-up jobs: ``min(
worker_concurrency, 16) + 8`` connections at most, opened only when needed.
Tying the pool to concurrency would let a worker at concurrency 100 open 108
connections, past a default server's ``max_connections``.

It is pinged when it opens, so a wrong URL fails at start-up with
:class:`~jobrun.errors.DatabaseUnavailable` naming host, port and database, never
later inside a job, and never with the password in the message.

The synchronous store (:class:`~jobrun.postgres.store_sync.SyncStore`) runs on
:func:`open_sync_pool`: the same connection settings and checks, on psycopg's
sync pool, sized by the caller (a sync service has no worker concurrency).

``pgbouncer=True`` opens connections that keep no state on the server between
transactions, for a pool that goes through PgBouncer in transaction mode (where
consecutive transactions of one client connection may run on different server
connections): no startup ``options`` (the session time zone and idle limit are
left to the server, the role or the bouncer; timestamps are converted to UTC on
read either way) and no server-side prepared statements (``prepare_threshold``
None: a statement prepared on one server connection does not exist on the next).
"""

from __future__ import annotations

import json
import os
import select
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from jobrun.durations import format_duration, positive_seconds
from jobrun.errors import ConfigurationError, DatabaseUnavailable
from jobrun.sqlc import system as system_queries

__all__ = [
    "DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT",
    "POOL_HEADROOM",
    "POOL_PER_JOB_CAP",
    "Pool",
    "SyncPool",
    "database_location",
    "open_pool",
    "open_sync_pool",
    "pool_max_size",
    "resolve_database_url",
    "unavailable_error",
]

Pool: TypeAlias = "AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]]"
"""The pool type jobrun hands around; the CLI and runtime name it without importing psycopg."""

SyncPool: TypeAlias = "ConnectionPool[psycopg.Connection[TupleRow]]"
"""The pool the synchronous store runs on."""

POOL_HEADROOM = 8
"""Connections for the worker's own loops: claim, completion, heartbeat, reaper, scheduler."""

POOL_PER_JOB_CAP = 16
"""Most connections a worker's concurrency adds to the pool (for handlers' own use)."""


def pool_max_size(worker_concurrency: int) -> int:
    """The most connections :func:`open_pool` opens for a worker of ``worker_concurrency``."""
    return min(worker_concurrency, POOL_PER_JOB_CAP) + POOL_HEADROOM


def _parse(url: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        # The parser's message can quote the URL, password included: say only what failed.
        raise ConfigurationError(
            "the database URL is not a valid PostgreSQL connection string"
        ) from None


DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=10)
"""How long opening a pool waits for the server before reporting it unreachable."""

DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT = timedelta(minutes=1)
"""How long a pooled session may sit idle inside a transaction before the server ends it."""


def _check_idle_timeout(idle_in_transaction_timeout: timedelta | None) -> None:
    if idle_in_transaction_timeout is not None and idle_in_transaction_timeout <= timedelta(0):
        raise ConfigurationError(
            "idle_in_transaction_timeout must be positive (or None to leave the server's "
            f"setting), got {format_duration(idle_in_transaction_timeout)}"
        )


def _session_options(options: object, idle_in_transaction_timeout: timedelta | None) -> str:
    given = str(options or "")
    settings = [given, "-c timezone=UTC"]
    if "jit" not in given:
        # JIT compiles a statement whose estimated cost passes jit_above_cost, on every
        # execution. The claim's estimate passes it once jobs holds millions of rows
        # (its loose index scan is costed as if it read each priority level whole),
        # and compiling it took 65 ms where running it took 0.5: jobrun's short
        # statements never gain from JIT. A caller's own jit setting is kept.
        settings.append("-c jit=off")
    if idle_in_transaction_timeout is not None:
        ms = max(1, round(idle_in_transaction_timeout.total_seconds() * 1000))
        settings.append(f"-c idle_in_transaction_session_timeout={ms}")
    return " ".join(s for s in settings if s)


def _connection_kwargs(
    url: str, idle_in_transaction_timeout: timedelta | None, *, pgbouncer: bool = False
) -> dict[str, Any]:
    # Autocommit: a single statement is its own transaction in one round trip;
    # the store opens explicit transactions where it needs several.
    # Session time zone UTC: timestamps arrive already in UTC, so the clock
    # rule costs no per-value conversion (the caller's own options are kept).
    # idle_in_transaction_session_timeout: a session that holds a transaction
    # open while its client does something else (a caller's transaction that
    # enqueues and then waits on a slow call, a process stalled mid-transaction)
    # is ended by the server, which releases its locks. The store's completions
    # are bounded by commit_timeout, below it.
    if pgbouncer:
        # Through a transaction-mode bouncer nothing may live in the session: the
        # bouncer refuses unknown startup parameters, and a prepared statement
        # exists only on the server connection that prepared it.
        return {"autocommit": True, "prepare_threshold": None}
    options = _session_options(_parse(url).get("options"), idle_in_transaction_timeout)
    return {"autocommit": True, "options": options}


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


def _refused(url: str, reason: str) -> DatabaseUnavailable:
    """unavailable_error, with the likely cause when a pooler refused the startup options."""
    if "unsupported startup parameter" in reason:
        reason += (
            " (behind PgBouncer in transaction mode? set pgbouncer=True, "
            "--pgbouncer or JOBRUN_PGBOUNCER=1)"
        )
    return unavailable_error(url, reason)


# The scanner json.loads itself runs (C, when available); not in the type stubs.
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_loads(data: str | bytes) -> Any:
    """json.loads, faster for what PostgreSQL sends: ``{}`` unparsed, the rest scanned directly.

    The claim returns each job's ``meta`` (almost always ``{}``) with its
    payload: a JSON parse per row for nothing on the hottest path. Other
    values are decoded as UTF-8 (what the server sends; json.loads would
    first guess the encoding of bytes) and handed to json's own C scanner,
    which is what json.loads runs after skipping whitespace and before
    checking for trailing data. jsonb's text has neither; a json column's
    may, and then (the scanner stopping early or failing at the start)
    json.loads decides, errors included.
    """
    if data == b"{}" or data == "{}":
        return {}
    text = data if isinstance(data, str) else str(data, "utf-8")
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


async def _configure_async(conn: psycopg.AsyncConnection[Any]) -> None:
    set_json_loads(_json_loads, conn)


async def open_pool(
    url: str,
    *,
    worker_concurrency: int = 10,
    min_size: int = 1,
    connect_timeout: timedelta = DEFAULT_CONNECT_TIMEOUT,
    name: str = "jobrun",
    idle_in_transaction_timeout: timedelta | None = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
    pgbouncer: bool = False,
) -> Pool:
    """Open and ping a pool of up to :func:`pool_max_size` connections to ``url``.

    Every session is UTC and autocommit, and has PostgreSQL's
    ``idle_in_transaction_session_timeout`` set to ``idle_in_transaction_timeout``
    (one minute by default): the server ends a session left idle inside a
    transaction that long, releasing its locks. Keep it above the stores'
    ``commit_timeout``. ``None`` leaves the server's setting alone, for
    poolers that refuse startup options (PgBouncer without
    ``ignore_startup_parameters = options``); set it on the role instead.

    ``pgbouncer=True``: ``url`` is PgBouncer in transaction mode. The
    connections carry no session state (no startup options, so
    ``idle_in_transaction_timeout`` is not applied: set
    ``idle_in_transaction_session_timeout`` on the role, or PgBouncer's
    ``idle_transaction_timeout``) and prepare no statements on the server.

    Raises DatabaseUnavailable when the server cannot be reached or refuses the
    login, ConfigurationError for a malformed URL, a concurrency below 1 or a
    non-positive idle limit. The caller closes the pool (``await pool.close()``
    or ``async with pool``).
    """
    if worker_concurrency < 1:
        raise ConfigurationError(f"worker_concurrency must be at least 1, not {worker_concurrency}")
    timeout = positive_seconds("connect_timeout", connect_timeout)
    _check_idle_timeout(idle_in_transaction_timeout)
    _parse(url)
    max_size = pool_max_size(worker_concurrency)
    kwargs = _connection_kwargs(url, idle_in_transaction_timeout, pgbouncer=pgbouncer)
    # A first direct connection, with the pool's settings, gives libpq's own reason
    # when the server is not there or refuses them; the pool would only time out.
    try:
        probe = await psycopg.AsyncConnection.connect(
            url, connect_timeout=max(1, round(timeout)), **kwargs
        )
    except psycopg.Error as exc:
        raise _refused(url, str(exc)) from None
    await probe.close()

    pool: Pool = AsyncConnectionPool(
        url,
        min_size=min(min_size, max_size),
        max_size=max_size,
        open=False,
        name=name,
        timeout=timeout,
        # No per-borrow check: it would add a round trip to every claim and
        # completion. A connection the server dropped fails its next statement,
        # the pool discards it, and the caller's loop retries.
        kwargs=kwargs,
        configure=_configure_async,
    )
    try:
        await pool.open(wait=True, timeout=timeout)
        async with pool.connection() as conn:
            await system_queries.AsyncQuerier(conn).database_now()
    except (PoolTimeout, psycopg.Error) as exc:
        await pool.close()
        raise unavailable_error(url, str(exc)) from None
    except BaseException:
        await pool.close()
        raise
    return pool


def open_sync_pool(
    url: str,
    *,
    max_size: int = 4,
    connect_timeout: timedelta = DEFAULT_CONNECT_TIMEOUT,
    idle_in_transaction_timeout: timedelta | None = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
    pgbouncer: bool = False,
) -> SyncPool:
    """Open and ping a sync pool of up to ``max_size`` connections to ``url``.

    The same connection settings (``idle_in_transaction_timeout`` and
    ``pgbouncer`` included) and errors as :func:`open_pool`: DatabaseUnavailable (host, port and
    database, never the password) when the server cannot be reached,
    ConfigurationError for a malformed URL, a size below 1 or a non-positive
    idle limit. The caller closes the pool (``pool.close()`` or ``with pool``).
    """
    if max_size < 1:
        raise ConfigurationError(f"max_size must be at least 1, not {max_size}")
    timeout = positive_seconds("connect_timeout", connect_timeout)
    _check_idle_timeout(idle_in_transaction_timeout)
    _parse(url)
    kwargs = _connection_kwargs(url, idle_in_transaction_timeout, pgbouncer=pgbouncer)
    try:
        # A direct connection first: libpq's reason beats the pool's bare timeout.
        probe = psycopg.connect(url, connect_timeout=max(1, round(timeout)), **kwargs)
    except psycopg.Error as exc:
        raise _refused(url, str(exc)) from None
    probe.close()
    pool: SyncPool = ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        open=False,
        name="jobrun-sync",
        timeout=timeout,
        # A sync producer mostly idles between requests, and has no loop that
        # retries: a borrowed connection the server dropped is replaced
        # instead of failing the caller's request.
        check=_check_if_the_server_spoke,
        kwargs=kwargs,
    )
    try:
        pool.open(wait=True, timeout=timeout)
        with pool.connection() as conn:
            system_queries.Querier(conn).database_now()
    except (PoolTimeout, psycopg.Error) as exc:
        pool.close()
        raise unavailable_error(url, str(exc)) from None
    except BaseException:
        pool.close()
        raise
    return pool


def _check_if_the_server_spoke(conn: psycopg.Connection[Any]) -> None:
    """Check a borrowed connection with a round trip only if it has something to read.

    An idle connection has nothing to read unless the server ended it (a
    restart, ``pg_terminate_backend``, ``idle_session_timeout``: the server
    sends its error and closes the socket) or sent a notice. Polling the
    socket costs no round trip, where psycopg's check added one to every
    borrow, on top of the statement's own. A peer that vanished without
    closing (a dropped NAT entry) looks alive to both checks alike.
    """
    fd = conn.pgconn.socket
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        readable = bool(poller.poll(0))
    else:  # pragma: no cover - Windows has no poll()
        readable = bool(select.select([fd], [], [], 0)[0])
    if readable:
        ConnectionPool.check_connection(conn)


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
