"""Operational failures reach the Python API as jobrun errors, never as raw psycopg errors."""

from __future__ import annotations

import contextlib
import threading

import pytest

from jobrun.errors import DatabaseUnavailable, PoolExhausted
from jobrun.postgres import SyncProducer, open_pool
from jobrun.postgres.store import Store

# -- an exhausted pool --------------------------------------------------------------------------


async def test_an_exhausted_pool_says_no_connection_was_free_and_names_its_size(
    db_url: str,
) -> None:
    pool = await open_pool(db_url, worker_concurrency=1, connect_timeout=1)
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
    with SyncProducer(db_url, max_pool_size=1, connect_timeout=1) as producer:
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
