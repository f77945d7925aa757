"""Opening the pool: sizing, the ping, and errors that name the server but not the password."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import pytest

from jobrun import Client, Config
from jobrun.errors import ConfigurationError, DatabaseUnavailable
from jobrun.postgres import embedded_database_url, open_pool, open_sync_pool, resolve_database_url
from jobrun.postgres.pool import pool_max_size


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_database_names_host_port_db_but_not_the_password() -> None:
    port = closed_port()
    url = f"postgresql://jobrun:hunter2-s3cret@127.0.0.1:{port}/jobs_prod"

    with pytest.raises(DatabaseUnavailable) as info:
        await open_pool(url, connect_timeout=timedelta(seconds=2))

    message = str(info.value)
    assert f"127.0.0.1:{port}" in message
    assert "jobs_prod" in message
    assert "hunter2-s3cret" not in message
    assert "hunter2-s3cret" not in repr(info.value.args)
    assert (info.value.host, info.value.port, info.value.dbname) == (
        "127.0.0.1",
        str(port),
        "jobs_prod",
    )
    assert info.value.__cause__ is None and info.value.__suppress_context__


async def test_missing_database_is_unavailable(pg_admin_url: str) -> None:
    from psycopg.conninfo import make_conninfo

    url = make_conninfo(pg_admin_url, dbname="jobrun_no_such_database")
    with pytest.raises(DatabaseUnavailable, match="jobrun_no_such_database"):
        await open_pool(url)


async def test_malformed_url_is_a_configuration_error_without_the_password() -> None:
    with pytest.raises(ConfigurationError) as info:
        await open_pool("postgresql://u:pa55word@host:notaport/db?bogus_option=1")
    assert "pa55word" not in str(info.value)


async def test_pool_is_sized_for_the_worker_and_pinged(db_url: str) -> None:
    pool = await open_pool(db_url, worker_concurrency=5)
    try:
        assert pool.max_size == 5 + 8
        assert pool.min_size <= 2
        assert pool.get_stats()["pool_size"] >= 1
    finally:
        await pool.close()


async def test_the_pool_stops_growing_with_concurrency(db_url: str) -> None:
    # Handlers hold no connection while they run, so concurrency 1,000 must not
    # mean 1,008 connections (a default server allows 100).
    assert [pool_max_size(c) for c in (1, 16, 100, 1000)] == [9, 24, 24, 24]
    async with Client(database_url=db_url) as client:
        assert Config().concurrency == 100
        assert client.pool.max_size == 24


async def test_worker_concurrency_below_one_is_refused(db_url: str) -> None:
    with pytest.raises(ConfigurationError):
        await open_pool(db_url, worker_concurrency=0)


def test_resolve_prefers_explicit_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBRUN_DATABASE_URL", "postgresql://from-env/db")
    assert resolve_database_url("postgresql://explicit/db") == "postgresql://explicit/db"
    assert resolve_database_url(None) == "postgresql://from-env/db"


def test_embedded_server_is_used_when_nothing_is_configured(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data_dir = tmp_path_factory.mktemp("embedded")
    monkeypatch.delenv("JOBRUN_DATABASE_URL", raising=False)
    monkeypatch.setenv("JOBRUN_EMBEDDED_DIR", str(data_dir))
    url = resolve_database_url(None)
    assert url == embedded_database_url(data_dir)
    assert "host=" in url


def _show_idle_timeout(conn: Any) -> str:
    return str(conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0])


async def test_pool_sessions_end_transactions_left_idle(db_url: str) -> None:
    pool = await open_pool(db_url, worker_concurrency=1)
    try:
        async with pool.connection() as conn:
            cur = await conn.execute("SHOW idle_in_transaction_session_timeout")
            assert (await cur.fetchone()) == ("1min",)
    finally:
        await pool.close()
    pool = await open_pool(
        db_url, worker_concurrency=1, idle_in_transaction_timeout=timedelta(seconds=5)
    )
    try:
        async with pool.connection() as conn:
            cur = await conn.execute("SHOW idle_in_transaction_session_timeout")
            assert (await cur.fetchone()) == ("5s",)
    finally:
        await pool.close()


async def test_the_idle_transaction_limit_can_be_turned_off(db_url: str) -> None:
    # e.g. behind PgBouncer, which refuses unknown startup options
    pool = await open_pool(db_url, worker_concurrency=1, idle_in_transaction_timeout=None)
    try:
        async with pool.connection() as conn:
            cur = await conn.execute("SHOW idle_in_transaction_session_timeout")
            assert (await cur.fetchone()) == ("0",)
    finally:
        await pool.close()


def test_sync_pool_sessions_end_transactions_left_idle(db_url: str) -> None:
    with open_sync_pool(db_url, max_size=1) as pool, pool.connection() as conn:
        assert _show_idle_timeout(conn) == "1min"
    with (
        open_sync_pool(db_url, max_size=1, idle_in_transaction_timeout=None) as pool,
        pool.connection() as conn,
    ):
        assert _show_idle_timeout(conn) == "0"


@pytest.mark.parametrize("bad", [timedelta(0), timedelta(seconds=-1)])
async def test_a_non_positive_idle_transaction_limit_is_refused(
    db_url: str, bad: timedelta
) -> None:
    with pytest.raises(ConfigurationError, match="idle_in_transaction_timeout"):
        await open_pool(db_url, idle_in_transaction_timeout=bad)
    with pytest.raises(ConfigurationError, match="idle_in_transaction_timeout"):
        open_sync_pool(db_url, idle_in_transaction_timeout=bad)


async def test_pool_sessions_run_without_jit_unless_the_url_asks_for_it(db_url: str) -> None:
    # JIT compiled the claim on a table of millions of rows in 65 ms, to run it in 0.5.
    pool = await open_pool(db_url, worker_concurrency=1)
    try:
        async with pool.connection() as conn:
            row = await (await conn.execute("SHOW jit")).fetchone()
        assert row == ("off",)
    finally:
        await pool.close()
    # The caller's options in the URL, in either form libpq takes.
    if "://" in db_url:
        own = db_url + ("&" if "?" in db_url else "?") + "options=-c%20jit%3Don"
    else:
        own = db_url + " options='-c jit=on'"
    pool = await open_pool(own, worker_concurrency=1)
    try:
        async with pool.connection() as conn:
            row = await (await conn.execute("SHOW jit")).fetchone()
        assert row == ("on",), "a caller's own jit setting is kept"
    finally:
        await pool.close()


def test_sync_pool_sessions_run_without_jit(db_url: str) -> None:
    with open_sync_pool(db_url, max_size=1) as pool, pool.connection() as conn:
        assert conn.execute("SHOW jit").fetchone() == ("off",)
