"""The statement and parameters a generated query method sends, without sending them.

The report's cases call the generated ``Querier`` methods with the store's own
types (``JobListParams``, enums, ``Jsonb``-wrapped payloads), so a case is
type-checked like the store's code and its parameters are adapted exactly as
the store's are. The ``Querier`` wraps a :class:`RecordingConnection`, whose
cursor raises :class:`Captured` with the statement and its parameters at the
first ``execute`` (or ``copy``); the report then runs that statement under
EXPLAIN on the real connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import psycopg

__all__ = ["Captured", "RecordingConnection", "Statement", "capture", "recording"]


@dataclass(frozen=True, slots=True)
class Statement:
    """What a generated method would have sent."""

    text: str
    params: Mapping[str, Any] | None
    copy: bool
    """A ``COPY ... FROM STDIN`` (``:copyfrom``): PostgreSQL does not plan it."""


class Captured(Exception):
    """Raised by the recording cursor to stop the method at its first statement."""

    def __init__(self, statement: Statement) -> None:
        super().__init__(statement.text)
        self.statement = statement


class _Cursor:
    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, query: str, params: Mapping[str, Any] | None = None, **_: Any) -> None:
        raise Captured(Statement(query, params, copy=False))

    def executemany(self, query: str, params_seq: Any, **_: Any) -> None:
        first = next(iter(params_seq), None)
        raise Captured(Statement(query, first, copy=False))

    def copy(self, statement: str, *_: Any, **__: Any) -> None:
        raise Captured(Statement(statement, None, copy=True))


class _PgConn:
    pipeline_status = 0


class RecordingConnection:
    """Just enough of a psycopg connection for the generated ``Querier`` methods."""

    pgconn = _PgConn()

    def cursor(self, *_: Any, **__: Any) -> _Cursor:
        """A cursor that captures the first statement instead of sending it."""
        return _Cursor()

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[None]:
        """No pipeline: the statement is captured before anything is sent."""
        yield


def recording() -> psycopg.Connection[Any]:
    """A recording connection, typed as what the generated ``Querier`` takes."""
    return cast("psycopg.Connection[Any]", RecordingConnection())


def capture(call: Callable[[], object]) -> Statement:
    """The statement ``call`` (a generated method called on a recording connection) sends."""
    try:
        call()
    except Captured as captured:
        return captured.statement
    raise RuntimeError("the case called no generated query method")
