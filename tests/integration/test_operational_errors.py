"""Operational failures reach the Python API as jobrun errors, never as raw psycopg errors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from jobrun.config import Config
from jobrun.domain import JobState, NewJob, NewSchedule, SchedulePatch
from jobrun.errors import (
    DatabaseUnavailable,
    InvalidSchedule,
    MigrationError,
    PoolExhausted,
    SchemaMissing,
)
from jobrun.outages import process_outages
from jobrun.postgres import Pool, SyncProducer, open_pool
from jobrun.postgres.goose_files import (
    default_migrations_source,
    load_migrations,
    migration_versions,
)
from jobrun.postgres.migrate import check_schema
from jobrun.postgres.store import Store
from jobrun.registry import JobContext, Registry
from jobrun.testing import eventually
from jobrun.worker import Worker

# -- a database that was never migrated ---------------------------------------------------------


async def test_the_store_on_a_never_migrated_database_raises_schema_missing(
    empty_db_url: str,
) -> None:
    pool = await open_pool(empty_db_url, worker_concurrency=1)
    try:
        store = Store(pool)
        for call in (
            store.depth(),
            store.enqueue(NewJob(type="t")),
            store.list_schedules(),
            store.claim(["default"], "w1", 5, timedelta(seconds=30)),
        ):
            with pytest.raises(SchemaMissing, match="run `jobrun migrate`"):
                await call
        with pytest.raises(SchemaMissing, match="schema is missing"):
            await check_schema(pool)
    finally:
        await pool.close()
    with SyncProducer(empty_db_url) as producer, pytest.raises(SchemaMissing):
        producer.enqueue(NewJob(type="t"))


async def test_check_schema_names_migrations_not_yet_applied(pool: Pool, tmp_path: Path) -> None:
    await check_schema(pool)  # the migrated database is current
    source = default_migrations_source()
    for entry in source.iterdir():
        if entry.name.endswith(".sql"):
            (tmp_path / entry.name).write_text(entry.read_text(encoding="utf-8"))
    (tmp_path / "99999_later.sql").write_text("-- +goose Up\nSELECT 1;\n")
    with pytest.raises(SchemaMissing, match="99999") as info:
        await check_schema(pool, source=tmp_path)
    assert info.value.pending == (99999,)


def test_migration_versions_are_the_parsed_migrations_versions(tmp_path: Path) -> None:
    assert migration_versions() == [m.version for m in load_migrations()]
    (tmp_path / "00007_seven.sql").write_text("not even SQL")
    (tmp_path / "00003_three.sql").write_text("-- +goose Up\nSELECT 1;\n")
    (tmp_path / "notes.txt").write_text("not a migration")
    assert migration_versions(tmp_path) == [3, 7]  # names only: contents are migrate's concern
    (tmp_path / "draft.sql").write_text("-- +goose Up\nSELECT 1;\n")
    with pytest.raises(MigrationError, match=r"draft\.sql: a migration file name must look like"):
        migration_versions(tmp_path)


async def test_check_schema_survives_a_pooled_connection_the_server_dropped(db_url: str) -> None:
    # `jobrun worker` checks the schema at start-up on a pooled connection.
    # One the server ended since the pool opened it (a restart, a kill)
    # fails its first statement: the check takes a fresh one instead of
    # ending the worker with "cannot reach PostgreSQL".
    pool = await open_pool(db_url, worker_concurrency=1, min_size=1)
    try:
        async with pool.connection() as conn:
            pid = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]  # type: ignore[index]
        with psycopg.connect(db_url, autocommit=True) as admin:
            # With a timeout it returns once the backend has exited.
            ended = admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone()
            assert ended == (True,)
        await check_schema(pool)
        # And the check still fails at once where the schema is missing.
        async with pool.connection() as conn:
            await conn.execute("ALTER TABLE goose_db_version RENAME TO goose_moved")
        with pytest.raises(SchemaMissing):
            await check_schema(pool)
    finally:
        await pool.close()


async def test_a_missing_table_of_the_handlers_own_is_not_schema_missing(pool: Pool) -> None:
    store = Store(pool)
    await store.enqueue(NewJob(type="t"))
    (claimed,) = await store.claim(["default"], "w1", 1, timedelta(seconds=30))

    async def commit(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("INSERT INTO no_such_table_of_the_app VALUES (1)")

    with pytest.raises(psycopg.errors.UndefinedTable):
        await store.complete(claimed, "w1", commit)


# -- an exhausted pool --------------------------------------------------------------------------


async def test_an_exhausted_pool_says_no_connection_was_free_and_names_its_size(
    db_url: str,
) -> None:
    pool = await open_pool(db_url, worker_concurrency=1, connect_timeout=timedelta(seconds=1))
    try:
        store = Store(pool)
        async with contextlib.AsyncExitStack() as held:
            for _ in range(pool.max_size):
                await held.enter_async_context(pool.connection())
            with pytest.raises(PoolExhausted) as info:
                await store.now()
    finally:
        await pool.close()

    error = info.value
    message = str(error)
    assert "cannot reach" not in message
    assert "no connection" in message and "free" in message
    assert f"{pool.max_size} connections" in message
    assert "1s" in message
    assert (error.max_size, error.timeout) == (pool.max_size, 1.0)
    # Still a DatabaseUnavailable, so callers that retry on that retry on this too.
    assert isinstance(error, DatabaseUnavailable)


def test_an_exhausted_sync_pool_says_so_too(db_url: str) -> None:
    with SyncProducer(db_url, max_pool_size=1, connect_timeout=timedelta(seconds=1)) as producer:
        taken = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with producer.pool.connection():
                taken.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert taken.wait(10)
            with pytest.raises(PoolExhausted, match="1 connection"):
                producer.depth()
        finally:
            release.set()
            holder.join()


# -- schedules ----------------------------------------------------------------------------------


async def test_concurrent_creates_of_one_schedule_name_make_one_and_refuse_nine(
    db_url: str,
) -> None:
    # Ten callers on ten real connections at once: the name check must not race the insert.
    pool = await open_pool(db_url, worker_concurrency=10)
    try:
        store = Store(pool)
        async with contextlib.AsyncExitStack() as warm:
            # Open every connection first, so the creates really overlap.
            for _ in range(10):
                await warm.enter_async_context(pool.connection())
        new = NewSchedule(name="nightly", type="report.build", every=timedelta(minutes=5))
        for _ in range(5):
            results = await asyncio.gather(
                *(store.create_schedule(new) for _ in range(10)), return_exceptions=True
            )
            made = [r for r in results if not isinstance(r, BaseException)]
            refused = [r for r in results if isinstance(r, BaseException)]
            assert len(made) == 1, results
            assert len(refused) == 9
            for error in refused:
                assert isinstance(error, InvalidSchedule), repr(error)
                assert "a schedule named 'nightly' already exists" in str(error)
            await store.delete_schedule("nightly")
    finally:
        await pool.close()


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -1}, "max_attempts"),
        ({"queue": ""}, "queue"),
        ({"type": ""}, "type"),
        ({"timezone": ""}, "time zone"),
        ({"every": timedelta(0)}, "every"),
    ],
)
async def test_update_schedule_validates_given_falsy_values(
    pool: Pool, patch: dict[str, Any], needle: str
) -> None:
    store = Store(pool)
    created = await store.create_schedule(
        NewSchedule(name="s", type="t", every=timedelta(minutes=5), max_attempts=3)
    )
    with pytest.raises(InvalidSchedule, match=needle):
        await store.update_schedule("s", SchedulePatch(**patch))
    assert await store.get_schedule("s") == created


async def test_update_schedule_still_leaves_fields_not_given_alone(pool: Pool) -> None:
    store = Store(pool)
    await store.create_schedule(
        NewSchedule(name="s", type="t", queue="q", every=timedelta(minutes=5), max_attempts=3)
    )
    changed = await store.update_schedule("s", SchedulePatch(priority=0, payload={}))
    assert (changed.type, changed.queue, changed.max_attempts) == ("t", "q", 3)
    changed = await store.update_schedule("s", SchedulePatch(max_attempts=1))
    assert changed.max_attempts == 1


# -- a worker while the database goes away and comes back ---------------------------------------


def set_connections_allowed(admin_url: str, dbname: str, allowed: bool) -> None:
    """Refuse (and cut) or allow every connection to ``dbname``, superusers included."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                sql.Identifier(dbname), sql.Literal(allowed)
            )
        )
        if not allowed:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (dbname,),
            )


async def until(check: Callable[[], bool], within: float, what: str) -> None:
    await eventually(check, within=within, what=what)


async def test_a_worker_logs_one_line_per_failure_and_one_when_the_database_is_back(
    db_url: str, pg_admin_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Each part's own failures are DEBUG during an outage; the process says it once.
    caplog.set_level(logging.DEBUG, logger="jobrun")
    process_outages().answered()  # an outage an earlier test left unended is not this one
    announced = process_outages().outages
    dbname = str(conninfo_to_dict(db_url)["dbname"])
    pool = await open_pool(db_url, worker_concurrency=2, connect_timeout=timedelta(seconds=1))
    store = Store(pool)
    registry = Registry()
    started, finish = asyncio.Event(), asyncio.Event()

    @registry.handler("outage.wait")
    async def wait(ctx: JobContext, payload: Any) -> None:
        started.set()
        await finish.wait()

    config = Config(
        concurrency=2,
        poll=timedelta(milliseconds=200),
        lease=timedelta(seconds=60),
        heartbeat_every=timedelta(milliseconds=300),
        reap_every=timedelta(milliseconds=300),
        shutdown_grace=timedelta(seconds=5),
    )
    worker = Worker(store, registry, config)

    def messages(prefix: str) -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage().startswith(prefix)]

    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        job = await store.enqueue(NewJob(type="outage.wait"))
        await asyncio.wait_for(started.wait(), 10)
        set_connections_allowed(pg_admin_url, dbname, False)
        try:
            await until(lambda: len(messages("claim failed")) >= 3, 20, "three failed claims")
            await until(lambda: bool(messages("heartbeat failed")), 10, "a failed heartbeat")
            await until(lambda: bool(messages("reaper pass failed")), 10, "a failed reap")
        finally:
            set_connections_allowed(pg_admin_url, dbname, True)
        await until(lambda: bool(messages("claims working again")), 30, "claims recovering")
        await until(lambda: bool(messages("heartbeats working again")), 30, "heartbeats back")
        await until(lambda: bool(messages("reaper working again")), 30, "reaper back")
        finish.set()

        async def succeeded() -> bool:
            return (await store.get(job.id)).state == JobState.SUCCEEDED

        await eventually(succeeded, within=20, what="the job completing after the outage")
    finally:
        finish.set()
        stop.set()
        await asyncio.wait_for(task, 30)
        await pool.close()

    ours = [r for r in caplog.records if r.name.startswith("jobrun")]
    shown = [r for r in ours if r.levelno >= logging.INFO]
    with_traceback = [r.getMessage() for r in shown if r.exc_info or r.exc_text]
    assert with_traceback == []
    for record in messages("claim failed") + messages("heartbeat failed"):
        assert record.levelno == logging.DEBUG
        assert "\n" not in record.getMessage()
        assert "cannot reach PostgreSQL" in record.getMessage(), record.getMessage()
    assert len(messages("claims working again")) == 1
    last_failure = max(r.created for r in messages("claim failed"))
    assert messages("claims working again")[0].created >= last_failure
    # What an operator sees at INFO: one line for the loss, one for the recovery.
    outage_lines = [r.getMessage() for r in shown if r.name == "jobrun.database"]
    assert len(outage_lines) == 2, outage_lines
    assert outage_lines[0].startswith("database unavailable, retrying until it answers: ")
    assert "cannot reach PostgreSQL" in outage_lines[0]
    assert outage_lines[1].startswith("database answers again after ")
    assert process_outages().outages == announced + 1
    others = [r.getMessage() for r in shown if r.levelno >= logging.WARNING]
    assert others == outage_lines, others
