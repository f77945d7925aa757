"""``conn=`` joins the caller's transaction whatever holds it (issue 30, item 1).

For each holder (psycopg sync and async, SQLAlchemy Connection, Session,
AsyncConnection and AsyncSession on the psycopg driver, Django's connection)
the same three stories run against a real database: the caller commits (the
jobs are there, next to the caller's row, and a real worker runs each once),
the caller rolls back (no job), and the caller rolls back to a savepoint taken
before the enqueue and commits the rest (the row stays, no job). Every
enqueue method goes through the holder: ``enqueue``, ``enqueue_batch`` and
``enqueue_many``. Then the refusals: another driver, a closed connection, a
framework holder in autocommit, the wrong kind for the store; each is one
UnsupportedConnection that says what is supported, and nothing is written.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import URL, create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from jobrun import Client, JobContext, NewJob, Registry, SyncClient
from jobrun.errors import ConfigurationError, UnsupportedConnection

ORDER = "INSERT INTO orders (id) VALUES (1)"


def _count(db_url: str, table: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def orders(db_url: str) -> str:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
    return db_url


def _sqlalchemy_url(db_url: str) -> URL:
    """``db_url`` (a conninfo string or URL) for SQLAlchemy's psycopg (3) dialect."""
    params = conninfo_to_dict(db_url)
    host = str(params.get("host") or "")
    return URL.create(
        "postgresql+psycopg",
        username=params.get("user"),
        password=params.get("password"),
        host=None if host.startswith("/") else host or None,
        port=int(params["port"]) if params.get("port") else None,
        database=params.get("dbname"),
        query={"host": host} if host.startswith("/") else {},
    )


async def _run_once(db_url: str, ids: list[UUID]) -> None:
    """A real worker drains the queue: every job in ``ids`` ran exactly once and succeeded."""
    registry = Registry()
    seen: Counter[UUID] = Counter()

    @registry.handler("t")
    def handle(ctx: JobContext, payload: Any) -> None:
        seen[ctx.job.id] += 1

    async with Client(registry, database_url=db_url, poll="5s") as client:
        await asyncio.wait_for(client.run_worker(drain=True), 60)
        states = {(await client.store.get(job_id)).state for job_id in ids}
    assert seen == Counter(dict.fromkeys(ids, 1))
    assert states == {"succeeded"}


# -- sync holders ---------------------------------------------------------------


@dataclass
class SyncHolder:
    """One transaction held by a framework, driven the framework's own way."""

    conn: Any
    write: Callable[[str], object]
    commit: Callable[[], object]
    rollback: Callable[[], object]
    savepoint_rolled_back: Callable[[], AbstractContextManager[object]]


@contextmanager
def _psycopg_sync(db_url: str) -> Iterator[SyncHolder]:
    with psycopg.connect(db_url) as conn:

        @contextmanager
        def savepoint() -> Iterator[None]:
            with conn.transaction() as tx:
                yield
                raise psycopg.Rollback(tx)

        yield SyncHolder(conn, conn.execute, conn.commit, conn.rollback, savepoint)


@contextmanager
def _sqlalchemy_connection(db_url: str) -> Iterator[SyncHolder]:
    engine = create_engine(_sqlalchemy_url(db_url))
    try:
        with engine.connect() as conn:

            @contextmanager
            def savepoint() -> Iterator[None]:
                nested = conn.begin_nested()
                yield
                nested.rollback()

            yield SyncHolder(
                conn, lambda sql: conn.execute(text(sql)), conn.commit, conn.rollback, savepoint
            )
    finally:
        engine.dispose()


@contextmanager
def _sqlalchemy_session(db_url: str) -> Iterator[SyncHolder]:
    engine = create_engine(_sqlalchemy_url(db_url))
    try:
        with Session(engine) as session:

            @contextmanager
            def savepoint() -> Iterator[None]:
                nested = session.begin_nested()
                yield
                nested.rollback()

            yield SyncHolder(
                session,
                lambda sql: session.execute(text(sql)),
                session.commit,
                session.rollback,
                savepoint,
            )
    finally:
        engine.dispose()


def _configure_django(db_url: str) -> Any:
    """Django's ``connection`` pointed at ``db_url``, as Django's test runner points it.

    Django is configured once per process; each test then renames the
    database, the way ``create_test_db`` does.
    """
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            DATABASES={
                "default": {"ENGINE": "django.db.backends.postgresql", "NAME": "postgres"},
                "lite": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
            },
            USE_TZ=True,
        )
        django.setup()
    from django.db import connection

    params = conninfo_to_dict(db_url)
    connection.close()
    connection.settings_dict.update(
        NAME=params.get("dbname"),
        USER=params.get("user", ""),
        HOST=params.get("host", ""),
        PORT=params.get("port", ""),
        PASSWORD=params.get("password", ""),
    )
    return connection


@contextmanager
def _django(db_url: str) -> Iterator[SyncHolder]:
    from django.db import transaction

    connection = _configure_django(db_url)
    atomic = transaction.atomic()
    atomic.__enter__()

    def commit() -> None:
        atomic.__exit__(None, None, None)

    def rollback() -> None:
        transaction.set_rollback(True)
        atomic.__exit__(None, None, None)

    @contextmanager
    def savepoint() -> Iterator[None]:
        with transaction.atomic():
            yield
            transaction.set_rollback(True)

    def write(sql: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql)

    try:
        yield SyncHolder(connection, write, commit, rollback, savepoint)
    finally:
        connection.close()


SYNC_HOLDERS = {
    "psycopg": _psycopg_sync,
    "sqlalchemy-connection": _sqlalchemy_connection,
    "sqlalchemy-session": _sqlalchemy_session,
    "django": _django,
}


@pytest.fixture(params=list(SYNC_HOLDERS))
def sync_holder(request: pytest.FixtureRequest, orders: str) -> Iterator[SyncHolder]:
    with SYNC_HOLDERS[request.param](orders) as holder:
        yield holder


def _enqueue_all_sync(jobs: SyncClient, conn: Any) -> list[UUID]:
    one = jobs.enqueue(NewJob(type="t"), conn=conn)
    batch = jobs.enqueue_batch([NewJob(type="t"), NewJob(type="t")], conn=conn)
    many = jobs.enqueue_many("t", [{"n": 1}, {"n": 2}], conn=conn)
    return [one.id, *(job.id for job in batch if not isinstance(job, Exception)), *many]


def test_sync_commit_publishes_the_jobs_and_each_runs_once(
    sync_holder: SyncHolder, orders: str
) -> None:
    with SyncClient(database_url=orders) as jobs:
        sync_holder.write(ORDER)
        ids = _enqueue_all_sync(jobs, sync_holder.conn)
        assert _count(orders, "jobs") == 0  # not before the caller commits
        sync_holder.commit()
    assert len(ids) == 5
    assert (_count(orders, "orders"), _count(orders, "jobs")) == (1, 5)
    asyncio.run(_run_once(orders, ids))


def test_sync_rollback_removes_the_jobs(sync_holder: SyncHolder, orders: str) -> None:
    with SyncClient(database_url=orders) as jobs:
        sync_holder.write(ORDER)
        _enqueue_all_sync(jobs, sync_holder.conn)
        sync_holder.rollback()
    assert (_count(orders, "orders"), _count(orders, "jobs")) == (0, 0)


def test_sync_savepoint_rollback_removes_the_jobs(sync_holder: SyncHolder, orders: str) -> None:
    with SyncClient(database_url=orders) as jobs:
        sync_holder.write(ORDER)
        with sync_holder.savepoint_rolled_back():
            _enqueue_all_sync(jobs, sync_holder.conn)
        sync_holder.commit()
    assert (_count(orders, "orders"), _count(orders, "jobs")) == (1, 0)


# -- async holders --------------------------------------------------------------


@dataclass
class AsyncHolder:
    """The async twin of SyncHolder."""

    conn: Any
    write: Callable[[str], Awaitable[object]]
    commit: Callable[[], Awaitable[object]]
    rollback: Callable[[], Awaitable[object]]
    savepoint_rolled_back: Callable[[], AbstractAsyncContextManager[object]]


@asynccontextmanager
async def _psycopg_async(db_url: str) -> AsyncIterator[AsyncHolder]:
    async with await psycopg.AsyncConnection.connect(db_url) as conn:

        @asynccontextmanager
        async def savepoint() -> AsyncIterator[None]:
            async with conn.transaction() as tx:
                yield
                raise psycopg.Rollback(tx)

        yield AsyncHolder(conn, conn.execute, conn.commit, conn.rollback, savepoint)


@asynccontextmanager
async def _sqlalchemy_async_connection(db_url: str) -> AsyncIterator[AsyncHolder]:
    engine = create_async_engine(_sqlalchemy_url(db_url))
    try:
        async with engine.connect() as conn:

            @asynccontextmanager
            async def savepoint() -> AsyncIterator[None]:
                nested = await conn.begin_nested()
                yield
                await nested.rollback()

            yield AsyncHolder(
                conn, lambda sql: conn.execute(text(sql)), conn.commit, conn.rollback, savepoint
            )
    finally:
        await engine.dispose()


@asynccontextmanager
async def _sqlalchemy_async_session(db_url: str) -> AsyncIterator[AsyncHolder]:
    engine = create_async_engine(_sqlalchemy_url(db_url))
    try:
        async with AsyncSession(engine) as session:

            @asynccontextmanager
            async def savepoint() -> AsyncIterator[None]:
                nested = await session.begin_nested()
                yield
                await nested.rollback()

            yield AsyncHolder(
                session,
                lambda sql: session.execute(text(sql)),
                session.commit,
                session.rollback,
                savepoint,
            )
    finally:
        await engine.dispose()


ASYNC_HOLDERS = {
    "psycopg": _psycopg_async,
    "sqlalchemy-async-connection": _sqlalchemy_async_connection,
    "sqlalchemy-async-session": _sqlalchemy_async_session,
}


@pytest.fixture(params=list(ASYNC_HOLDERS))
async def async_holder(request: pytest.FixtureRequest, orders: str) -> AsyncIterator[AsyncHolder]:
    async with ASYNC_HOLDERS[request.param](orders) as holder:
        yield holder


async def _enqueue_all(jobs: Client, conn: Any) -> list[UUID]:
    one = await jobs.enqueue(NewJob(type="t"), conn=conn)
    batch = await jobs.enqueue_batch([NewJob(type="t"), NewJob(type="t")], conn=conn)
    many = await jobs.enqueue_many("t", [{"n": 1}, {"n": 2}], conn=conn)
    return [one.id, *(job.id for job in batch if not isinstance(job, Exception)), *many]


async def test_async_commit_publishes_the_jobs_and_each_runs_once(
    async_holder: AsyncHolder, orders: str
) -> None:
    async with Client(database_url=orders) as jobs:
        await async_holder.write(ORDER)
        ids = await _enqueue_all(jobs, async_holder.conn)
        assert _count(orders, "jobs") == 0  # not before the caller commits
        await async_holder.commit()
    assert len(ids) == 5
    assert (_count(orders, "orders"), _count(orders, "jobs")) == (1, 5)
    await _run_once(orders, ids)


async def test_async_rollback_removes_the_jobs(async_holder: AsyncHolder, orders: str) -> None:
    async with Client(database_url=orders) as jobs:
        await async_holder.write(ORDER)
        await _enqueue_all(jobs, async_holder.conn)
        await async_holder.rollback()
    assert (_count(orders, "orders"), _count(orders, "jobs")) == (0, 0)


async def test_async_savepoint_rollback_removes_the_jobs(
    async_holder: AsyncHolder, orders: str
) -> None:
    async with Client(database_url=orders) as jobs:
        await async_holder.write(ORDER)
        async with async_holder.savepoint_rolled_back():
            await _enqueue_all(jobs, async_holder.conn)
        await async_holder.commit()
    assert (_count(orders, "orders"), _count(orders, "jobs")) == (1, 0)


# -- refusals -------------------------------------------------------------------


def _refused_sync(db_url: str, conn: Any) -> UnsupportedConnection:
    """The one error for ``conn`` from every sync enqueue method; nothing written."""
    with SyncClient(database_url=db_url) as jobs:
        calls: list[Callable[[], object]] = [
            lambda: jobs.enqueue(NewJob(type="t"), conn=conn),
            lambda: jobs.enqueue_batch([NewJob(type="t")], conn=conn),
            lambda: jobs.enqueue_many("t", [{}], conn=conn),
        ]
        errors = []
        for call in calls:
            with pytest.raises(UnsupportedConnection, match="conn must be") as caught:
                call()
            errors.append(caught.value)
    assert _count(db_url, "jobs") == 0
    assert isinstance(errors[0], ConfigurationError)
    assert len({str(error) for error in errors}) == 1
    return errors[0]


async def _refused_async(db_url: str, conn: Any) -> UnsupportedConnection:
    """The one error for ``conn`` from every async enqueue method; nothing written."""
    async with Client(database_url=db_url) as jobs:
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: jobs.enqueue(NewJob(type="t"), conn=conn),
            lambda: jobs.enqueue_batch([NewJob(type="t")], conn=conn),
            lambda: jobs.enqueue_many("t", [{}], conn=conn),
        ]
        errors = []
        for call in calls:
            with pytest.raises(UnsupportedConnection, match="conn must be") as caught:
                await call()
            errors.append(caught.value)
    assert _count(db_url, "jobs") == 0
    assert len({str(error) for error in errors}) == 1
    return errors[0]


def test_another_driver_is_refused_and_left_alone(db_url: str) -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn, Session(engine) as session:
        error = _refused_sync(db_url, conn)
        assert "sqlite3" in str(error)
        assert "SQLAlchemy Connection or Session on the psycopg driver" in str(error)
        _refused_sync(db_url, session)
        # The caller's connection and session are still theirs, and usable.
        assert conn.execute(text("SELECT 1")).scalar() == 1
        assert session.execute(text("SELECT 1")).scalar() == 1


def test_a_closed_connection_is_refused(db_url: str) -> None:
    conn = psycopg.connect(db_url)
    conn.close()
    assert "closed" in str(_refused_sync(db_url, conn))
    engine = create_engine(_sqlalchemy_url(db_url))
    try:
        holder = engine.connect()
        holder.close()
        assert "closed" in str(_refused_sync(db_url, holder))
    finally:
        engine.dispose()


def test_a_framework_holder_in_autocommit_is_refused(db_url: str) -> None:
    engine = create_engine(_sqlalchemy_url(db_url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            assert "autocommit" in str(_refused_sync(db_url, conn))
    finally:
        engine.dispose()


def test_django_outside_atomic_or_on_another_database_is_refused(db_url: str) -> None:
    connection = _configure_django(db_url)
    from django.db import connections

    try:
        assert "transaction.atomic()" in str(_refused_sync(db_url, connection))
        assert "sqlite" in str(_refused_sync(db_url, connections["lite"]))
    finally:
        connection.close()


def test_the_sync_store_refuses_async_holders_and_strangers(db_url: str) -> None:
    async def open_async() -> None:
        engine = create_async_engine(_sqlalchemy_url(db_url))
        try:
            async with AsyncSession(engine) as session:
                assert "Client or Store" in str(_refused_sync(db_url, session))
        finally:
            await engine.dispose()

    asyncio.run(open_async())
    _refused_sync(db_url, "postgresql://somewhere")


async def test_the_async_store_refuses_what_it_cannot_join(db_url: str) -> None:
    engine = create_engine("sqlite://")
    with Session(engine) as session:
        assert "SyncClient" in str(await _refused_async(db_url, session))
    conn = await psycopg.AsyncConnection.connect(db_url)
    await conn.close()
    assert "closed" in str(await _refused_async(db_url, conn))
    autocommit = create_async_engine(_sqlalchemy_url(db_url), isolation_level="AUTOCOMMIT")
    try:
        async with autocommit.connect() as held:
            assert "autocommit" in str(await _refused_async(db_url, held))
    finally:
        await autocommit.dispose()
    await _refused_async(db_url, object())
