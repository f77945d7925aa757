"""Run a generated statement on a pooled connection in one libpq exchange, without a cursor.

psycopg's cursor serves every case: it converts the query on each call, keeps
its own prepared-statement bookkeeping, and resumes the event loop once to
send and twice to read. Where one statement is the whole call and someone
waits for it (a single enqueue from a web request; the claim an idle worker
sends when a job arrives, and the statement that records its outcome), that
generality was about a quarter of the client's CPU per enqueue and about half
a millisecond of a wake-up's claim. A one-exchange connection wraps a pooled
connection and hands the generated querier a minimal cursor: the query's
placeholders are converted once per process, the statement is prepared once
per server session under a name of its own, and a call is one send and one
wait for the reply. Parameters are dumped and rows loaded by psycopg's own
:class:`~psycopg.adapt.Transformer` in the formats the placeholders ask for
(``%(name)s`` psycopg's choice, ``%(name)b`` binary, ``%(name)t`` text), so
values round-trip exactly as they do through a cursor.

Invariants:

* Only for connections jobrun's pool owns, in autocommit and outside pipeline
  mode (a caller's ``conn=`` keeps psycopg's cursor). The connection's lock is
  held across the exchange, as psycopg holds it.
* A prepared statement is keyed by its text and its parameters' type oids (an
  ``int`` dumps as int2, int4 or int8 by value), as psycopg keys its own. A
  connection with ``prepare_threshold`` None (behind PgBouncer) prepares
  nothing: each call sends an unnamed statement.
* A server session that lost a statement (``DEALLOCATE``, ``DISCARD ALL``) or
  whose cached plan no longer fits the table is repaired by preparing again,
  once, within the call.
* An interrupted exchange (cancellation, a dropped connection) leaves the
  connection busy or broken; the pool discards such a connection when it is
  returned, as it does after an interrupted cursor.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg
from psycopg import abc, errors, pq
from psycopg.adapt import PyFormat, Transformer

__all__ = ["AsyncOneExchangeConnection", "OneExchangeConnection"]

_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)([sbt])")
_FORMATS = {"s": PyFormat.AUTO, "b": PyFormat.BINARY, "t": PyFormat.TEXT}
_STALE_STATEMENT = frozenset({"26000", "0A000"})
"""invalid_sql_statement_name (the statement is gone), feature_not_supported
(``cached plan must not change result type``): prepare again."""


@dataclass(frozen=True, slots=True)
class _Positional:
    sql: bytes
    names: tuple[str, ...]
    formats: tuple[PyFormat, ...]


_positional_cache: dict[str, _Positional] = {}


def _positional(query: str) -> _Positional:
    """``query`` with its ``%(name)s`` (or ``b``, ``t``) placeholders as ``$n``; names in order."""
    found = _positional_cache.get(query)
    if found is None:
        names: list[str] = []
        formats: list[PyFormat] = []

        def number(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:
                return "%"
            if name not in names:
                names.append(name)
                # %(name)s lets psycopg choose the format, b and t insist on one.
                formats.append(_FORMATS[match.group(2)])
            return f"${names.index(name) + 1}"

        sql = _PLACEHOLDER.sub(number, query).encode()
        found = _positional_cache[query] = _Positional(sql, tuple(names), tuple(formats))
    return found


@dataclass(slots=True)
class _Session:
    """What one server session has prepared, and the connection's transformer."""

    transformer: abc.Transformer
    prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = field(default_factory=dict)
    made: int = 0

    def forget(self, key: tuple[bytes, tuple[int, ...]]) -> None:
        self.prepared.pop(key, None)

    def new_name(self) -> bytes:
        self.made += 1
        return b"jobrun_call_%d" % self.made


_sessions: weakref.WeakKeyDictionary[psycopg.BaseConnection[Any], _Session] = (
    weakref.WeakKeyDictionary()
)


def _session(conn: psycopg.BaseConnection[Any]) -> _Session:
    session = _sessions.get(conn)
    if session is None:
        session = _sessions[conn] = _Session(Transformer(conn))
    return session


@dataclass(slots=True)
class _Call:
    """One statement ready to send: its text, dumped parameters and their types."""

    session: _Session
    sql: bytes
    params: Sequence[abc.Buffer | None]
    types: tuple[int, ...]
    formats: Sequence[pq.Format]

    @classmethod
    def of(cls, conn: psycopg.BaseConnection[Any], query: str, args: Mapping[str, Any]) -> _Call:
        positional = _positional(query)
        session = _session(conn)
        tx = session.transformer
        params = tx.dump_sequence([args[n] for n in positional.names], positional.formats)
        # Both are set by the dump above (None only before any dump).
        types, formats = tx.types or (), tx.formats or []
        return cls(session, positional.sql, params, tuple(types), formats)

    @property
    def key(self) -> tuple[bytes, tuple[int, ...]]:
        return (self.sql, self.types)


def _check(conn: psycopg.BaseConnection[Any], result: pq.abc.PGresult) -> pq.abc.PGresult:
    status = result.status
    if status in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
        return result
    if status == pq.ExecStatus.FATAL_ERROR:
        if conn.pgconn.status == pq.ConnStatus.BAD:
            # libpq's own report of a lost connection carries no SQLSTATE, so
            # error_from_result would call it a plain DatabaseError; psycopg's
            # cursor raises OperationalError, which callers treat as the
            # database being unavailable.
            message = result.error_message.decode(conn.info.encoding, "replace")
            raise psycopg.OperationalError(" ".join(message.split()) or "the connection was lost")
        raise errors.error_from_result(result, encoding=conn.info.encoding)
    raise psycopg.ProgrammingError(
        f"a one-exchange statement got a {pq.ExecStatus(status).name} result;"
        " it runs single statements only"
    )


def _is_stale(exc: psycopg.Error) -> bool:
    return exc.sqlstate in _STALE_STATEMENT


class _Rows:
    """A statement's result as a cursor hands it out: the state both one-exchange cursors share."""

    def __init__(self, conn: psycopg.BaseConnection[Any]) -> None:
        self._conn = conn
        self._result: pq.abc.PGresult | None = None
        self._next = 0

    def _hold(self, call: _Call, result: pq.abc.PGresult) -> None:
        self._result = result
        self._next = 0
        call.session.transformer.set_pgresult(result)

    @property
    def rowcount(self) -> int:
        """Rows the statement affected or returned (-1 before it ran)."""
        if self._result is None:
            return -1
        count = self._result.command_tuples
        return -1 if count is None else count

    def _one(self) -> tuple[Any, ...] | None:
        result = self._result
        if result is None or self._next >= result.ntuples:
            return None
        row: tuple[Any, ...] | None = _session(self._conn).transformer.load_row(self._next, tuple)
        self._next += 1
        return row

    def _all(self) -> list[tuple[Any, ...]]:
        result = self._result
        if result is None or self._next >= result.ntuples:
            return []
        tx = _session(self._conn).transformer
        rows: list[tuple[Any, ...]] = tx.load_rows(self._next, result.ntuples, tuple)
        self._next = result.ntuples
        return rows


class _OneExchange:
    """A wrapped pooled connection: what both one-exchange connections share."""

    def __init__(self, conn: psycopg.BaseConnection[Any]) -> None:
        self._conn = conn

    @property
    def pgconn(self) -> pq.abc.PGconn:
        """The libpq connection underneath."""
        return self._conn.pgconn


# -- async ------------------------------------------------------------------------------


def _wake(fut: asyncio.Future[None]) -> None:
    # Readiness callbacks are level-triggered: one may fire again before the
    # waiting task has run and removed it.
    if not fut.done():
        fut.set_result(None)


async def _ready(fd: int, *, write: bool) -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    if write:
        loop.add_writer(fd, _wake, fut)
    else:
        loop.add_reader(fd, _wake, fut)
    try:
        await fut
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


async def _exchange(pgconn: pq.abc.PGconn) -> pq.abc.PGresult:
    """Flush what was sent, wait for the whole reply, return its one result."""
    while pgconn.flush():
        await _ready(pgconn.socket, write=True)
    # Nothing can have arrived yet: wait before reading rather than spend a
    # system call on a read that would find the socket empty.
    while True:
        await _ready(pgconn.socket, write=False)
        pgconn.consume_input()
        if not pgconn.is_busy():
            break
    result = pgconn.get_result()
    if result is None:  # pragma: no cover - a sent statement always has a result
        raise psycopg.OperationalError("the server sent no result")
    while pgconn.get_result() is not None:  # pragma: no cover - one statement, one result
        pass
    return result


async def _run_async(conn: psycopg.AsyncConnection[Any], call: _Call) -> pq.abc.PGresult:
    pgconn = conn.pgconn
    async with conn.lock:
        if conn.prepare_threshold is None:
            pgconn.send_query_params(
                call.sql, call.params, param_types=call.types, param_formats=call.formats
            )
            return _check(conn, await _exchange(pgconn))
        for attempt in (1, 2):
            name = call.session.prepared.get(call.key)
            if name is None:
                name = call.session.new_name()
                pgconn.send_prepare(name, call.sql, param_types=call.types)
                _check(conn, await _exchange(pgconn))
                call.session.prepared[call.key] = name
            pgconn.send_query_prepared(name, call.params, param_formats=call.formats)
            try:
                return _check(conn, await _exchange(pgconn))
            except psycopg.Error as exc:
                if attempt == 2 or not _is_stale(exc):
                    raise
                call.session.forget(call.key)
    raise AssertionError("unreachable")  # pragma: no cover


class _AsyncOneExchangeCursor(_Rows):
    """The part of psycopg's cursor the generated queriers use, over one exchange."""

    _conn: psycopg.AsyncConnection[Any]

    async def __aenter__(self) -> _AsyncOneExchangeCursor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._result = None

    async def execute(self, query: str, params: Mapping[str, Any] | None = None) -> None:
        """Run ``query`` (generated, with ``%(name)s`` placeholders) with ``params``."""
        call = _Call.of(self._conn, query, params or {})
        self._hold(call, await _run_async(self._conn, call))

    async def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or None."""
        return self._one()

    async def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row not fetched yet."""
        return self._all()


class AsyncOneExchangeConnection(_OneExchange):
    """A pooled autocommit connection as the generated queriers see it, minus the cursor's cost.

    Pass it where a querier takes a connection; only single statements
    (``:one``, ``:many``, ``:exec``, ``:execrows``) run on it.
    """

    _conn: psycopg.AsyncConnection[Any]

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        super().__init__(conn)

    def cursor(self) -> _AsyncOneExchangeCursor:
        """A cursor that runs one statement per ``execute`` in one exchange."""
        return _AsyncOneExchangeCursor(self._conn)


# -- sync -------------------------------------------------------------------------------


def _run_sync(conn: psycopg.Connection[Any], call: _Call) -> pq.abc.PGresult:
    # libpq's blocking calls release the GIL while they wait.
    pgconn = conn.pgconn
    with conn.lock:
        if conn.prepare_threshold is None:
            return _check(
                conn,
                pgconn.exec_params(
                    call.sql, call.params, param_types=call.types, param_formats=call.formats
                ),
            )
        for attempt in (1, 2):
            name = call.session.prepared.get(call.key)
            if name is None:
                name = call.session.new_name()
                _check(conn, pgconn.prepare(name, call.sql, param_types=call.types))
                call.session.prepared[call.key] = name
            try:
                # psycopg's stub leaves None (a NULL) out of exec_prepared's
                # parameters, which libpq and send_query_prepared accept.
                params = cast(Sequence[abc.Buffer], call.params)
                return _check(conn, pgconn.exec_prepared(name, params, param_formats=call.formats))
            except psycopg.Error as exc:
                if attempt == 2 or not _is_stale(exc):
                    raise
                call.session.forget(call.key)
    raise AssertionError("unreachable")  # pragma: no cover


class _OneExchangeCursor(_Rows):
    """The sync twin of the one-exchange cursor."""

    _conn: psycopg.Connection[Any]

    def __enter__(self) -> _OneExchangeCursor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._result = None

    def execute(self, query: str, params: Mapping[str, Any] | None = None) -> None:
        """Run ``query`` (generated, with ``%(name)s`` placeholders) with ``params``."""
        call = _Call.of(self._conn, query, params or {})
        self._hold(call, _run_sync(self._conn, call))

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or None."""
        return self._one()

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row not fetched yet."""
        return self._all()


class OneExchangeConnection(_OneExchange):
    """The sync twin of :class:`AsyncOneExchangeConnection`."""

    _conn: psycopg.Connection[Any]

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        super().__init__(conn)

    def cursor(self) -> _OneExchangeCursor:
        """A cursor that runs one statement per ``execute`` in one exchange."""
        return _OneExchangeCursor(self._conn)
