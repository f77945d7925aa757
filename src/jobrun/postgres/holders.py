"""The driver connection under whatever holds the caller's transaction.

``conn=`` on the enqueue methods takes the transaction the caller already
holds, in the form their service holds it:

- a psycopg connection (``psycopg.AsyncConnection`` for the async store,
  ``psycopg.Connection`` for the sync one);
- SQLAlchemy on the psycopg (3) driver (``postgresql+psycopg://``): a
  ``Connection`` or ``Session`` (sync store), an ``AsyncConnection`` or
  ``AsyncSession`` (async store);
- Django's connection (``django.db.connection``, psycopg 3 backend) inside
  ``transaction.atomic()`` (sync store).

The psycopg connection underneath is used as it is: nothing here commits,
rolls back or closes what the caller owns, so their commit publishes the job
and their rollback (or a rollback to a savepoint taken before the enqueue)
removes it.

What "a transaction was meant" means: a SQLAlchemy or Django holder is only
ever passed to share its transaction, so one whose driver connection is in
autocommit (SQLAlchemy's ``isolation_level="AUTOCOMMIT"``, Django outside
``transaction.atomic()``) is refused: the job would commit at once, apart
from the caller's rows. A bare psycopg connection in autocommit keeps its
documented meaning: the job goes in by a short transaction of its own.
A SQLAlchemy connection with no transaction begun gets one begun, as its
own first statement would (the caller's ``commit()`` then commits it).

Everything else (another driver, a closed connection, a sync holder given to
the async store or the reverse) is refused with one
:class:`jobrun.errors.UnsupportedConnection` that says what is supported.
SQLAlchemy and Django are recognised by the module of the holder's type and
never imported: neither is a dependency of jobrun.
"""

from __future__ import annotations

from typing import Any

import psycopg

from jobrun.errors import UnsupportedConnection

__all__ = ["unwrap_async", "unwrap_sync"]

_ASYNC_SUPPORTED = (
    "a psycopg.AsyncConnection, or a SQLAlchemy AsyncConnection or AsyncSession "
    "on the psycopg driver (postgresql+psycopg://); sync holders (psycopg.Connection, "
    "SQLAlchemy Connection/Session, django.db.connection) go to SyncClient, "
    "SyncProducer or SyncStore"
)
_SYNC_SUPPORTED = (
    "a sync psycopg.Connection, a SQLAlchemy Connection or Session on the psycopg driver "
    "(postgresql+psycopg://), or django.db.connection (psycopg 3 backend) inside "
    "transaction.atomic(); async holders go to Client or Store"
)


def _name(obj: object) -> str:
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"


def _refuse(holder: object, why: str, *, want_async: bool) -> UnsupportedConnection:
    supported = _ASYNC_SUPPORTED if want_async else _SYNC_SUPPORTED
    return UnsupportedConnection(
        f"conn={_name(holder)} cannot carry the job: {why}; conn must be {supported}"
    )


def _framework(holder: object) -> str:
    """The top-level package of the holder's type: ``sqlalchemy``, ``django``, ..."""
    return type(holder).__module__.partition(".")[0]


def _checked(driver: object, holder: object, *, want_async: bool, meant: bool) -> Any:
    """``driver`` when it is an open psycopg connection of the wanted kind; else the error.

    ``meant``: the holder exists to share a transaction, so autocommit is refused.
    """
    expected = psycopg.AsyncConnection if want_async else psycopg.Connection
    if not isinstance(driver, psycopg.BaseConnection):
        raise _refuse(holder, f"its driver connection is {_name(driver)}", want_async=want_async)
    if not isinstance(driver, expected):
        other = "a sync" if want_async else "an async"
        raise _refuse(holder, f"it is {other} connection", want_async=want_async)
    if driver.closed:
        raise _refuse(holder, "the connection is closed", want_async=want_async)
    if meant and driver.autocommit:
        raise _refuse(
            holder,
            "its connection is in autocommit, so there is no transaction to join "
            "(SQLAlchemy: isolation_level other than AUTOCOMMIT; Django: inside "
            "transaction.atomic())",
            want_async=want_async,
        )
    return driver


def _async_sqlalchemy(holder: object) -> bool:
    """Whether ``holder`` is an AsyncSession or AsyncConnection of SQLAlchemy."""
    return hasattr(holder, "sync_session") or hasattr(holder, "sync_connection")


def _open_sqlalchemy(holder: object, connection: Any, *, want_async: bool) -> None:
    """Refuse a closed or invalidated SQLAlchemy connection (its pool would raise later)."""
    if connection.closed or connection.invalidated:
        raise _refuse(holder, "the connection is closed", want_async=want_async)


async def unwrap_async(holder: object) -> psycopg.AsyncConnection[Any]:
    """The psycopg.AsyncConnection under ``holder``, the caller's transaction holder.

    Raises UnsupportedConnection for anything the async store cannot join.
    """
    if isinstance(holder, psycopg.BaseConnection):
        return _checked(holder, holder, want_async=True, meant=False)  # type: ignore[no-any-return]
    if _framework(holder) == "sqlalchemy" and _async_sqlalchemy(holder):
        connection: Any = holder
        if hasattr(holder, "sync_session"):  # an AsyncSession: its connection, begun
            connection = await holder.connection()  # type: ignore[attr-defined]
        _open_sqlalchemy(holder, connection, want_async=True)
        if not connection.in_transaction():
            await connection.begin()
        raw = await connection.get_raw_connection()
        return _checked(raw.driver_connection, holder, want_async=True, meant=True)  # type: ignore[no-any-return]
    if _framework(holder) in ("sqlalchemy", "django"):
        raise _refuse(holder, "it is a sync holder", want_async=True)
    raise _refuse(holder, "it is not a transaction holder jobrun knows", want_async=True)


def unwrap_sync(holder: object) -> psycopg.Connection[Any]:
    """The psycopg.Connection under ``holder``, the caller's transaction holder.

    Raises UnsupportedConnection for anything the sync store cannot join.
    """
    if isinstance(holder, psycopg.BaseConnection):
        return _checked(holder, holder, want_async=False, meant=False)  # type: ignore[no-any-return]
    framework = _framework(holder)
    if framework == "sqlalchemy" and _async_sqlalchemy(holder):
        raise _refuse(holder, "it is an async holder", want_async=False)
    if framework == "sqlalchemy":
        connection: Any = holder
        if hasattr(holder, "get_bind"):  # a Session (or scoped_session): its connection, begun
            connection = holder.connection()  # type: ignore[attr-defined]
        if hasattr(connection, "in_transaction") and hasattr(connection, "invalidated"):
            _open_sqlalchemy(holder, connection, want_async=False)
            if not connection.in_transaction():
                connection.begin()
            driver = connection.connection.driver_connection
            return _checked(driver, holder, want_async=False, meant=True)  # type: ignore[no-any-return]
    if framework == "django" and hasattr(holder, "ensure_connection"):
        django_conn: Any = holder
        if django_conn.vendor != "postgresql":
            raise _refuse(holder, f"its database is {django_conn.vendor}", want_async=False)
        django_conn.ensure_connection()
        return _checked(django_conn.connection, holder, want_async=False, meant=True)  # type: ignore[no-any-return]
    raise _refuse(holder, "it is not a transaction holder jobrun knows", want_async=False)
