"""AdvisoryLocker (the Locker port) on real session advisory locks."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import psycopg
import pytest

from jobrun.errors import ConfigurationError, DatabaseUnavailable
from jobrun.ports import Locker, LockHandle
from jobrun.postgres.lock import AdvisoryLock, AdvisoryLocker

KEY = 424242


def locker(db_url: str, name: str) -> AdvisoryLocker:
    return AdvisoryLocker(db_url, application_name=name, probe_every=timedelta(milliseconds=100))


def unique_name() -> str:
    return f"jobrun-locker-{uuid.uuid4().hex[:8]}"


async def terminate(db_url: str, app_name: str) -> int:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            (app_name,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def lock_holders(db_url: str, key: int) -> int:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND objid = (%s::bigint & 4294967295)::oid",
            (key,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def test_advisory_locker_implements_the_ports(db_url: str) -> None:
    lk = locker(db_url, unique_name())
    assert isinstance(lk, Locker)
    held = await lk.try_acquire(KEY)
    assert isinstance(held, LockHandle)
    await held.release()


async def test_only_one_of_two_lockers_acquires(db_url: str) -> None:
    first, second = locker(db_url, unique_name()), locker(db_url, unique_name())
    held = await first.try_acquire(KEY)
    assert held is not None
    try:
        assert await second.try_acquire(KEY) is None
        assert await first.try_acquire(KEY) is None  # a new session, so it is refused too
        assert not held.lost
        assert await lock_holders(db_url, KEY) == 1
    finally:
        await held.release()


async def test_concurrent_acquires_elect_exactly_one(db_url: str) -> None:
    lockers = [locker(db_url, unique_name()) for _ in range(8)]
    handles = await asyncio.gather(*(lk.try_acquire(KEY) for lk in lockers))
    winners = [h for h in handles if h is not None]
    assert len(winners) == 1
    await winners[0].release()


async def test_release_lets_the_other_acquire(db_url: str) -> None:
    first, second = locker(db_url, unique_name()), locker(db_url, unique_name())
    held = await first.try_acquire(KEY)
    assert held is not None
    await held.release()
    assert held.lost  # released: this handle no longer holds it
    await asyncio.wait_for(held.wait_lost(), 1)
    await held.release()  # idempotent
    other = await second.try_acquire(KEY)
    assert other is not None
    await other.release()
    assert await lock_holders(db_url, KEY) == 0


async def test_different_keys_do_not_conflict(db_url: str) -> None:
    lk = locker(db_url, unique_name())
    a = await lk.try_acquire(1)
    b = await lk.try_acquire(-(2**63))
    c = await lk.try_acquire(2**63 - 1)
    assert a is not None and b is not None and c is not None
    for h in (a, b, c):
        await h.release()


async def test_key_outside_bigint_is_rejected(db_url: str) -> None:
    with pytest.raises(ConfigurationError, match="bigint"):
        await locker(db_url, unique_name()).try_acquire(2**63)


async def test_terminated_holder_connection_is_lost_and_lock_moves(db_url: str) -> None:
    holder_name = unique_name()
    holder, other = locker(db_url, holder_name), locker(db_url, unique_name())
    held = await holder.try_acquire(KEY)
    assert held is not None
    assert await terminate(db_url, holder_name) == 1
    # The probe runs every 0.1 s: the holder is told well within a second.
    await asyncio.wait_for(held.wait_lost(), 2)
    assert held.lost
    taken = await other.try_acquire(KEY)
    assert taken is not None
    assert not taken.lost
    await held.release()  # harmless after a loss
    await taken.release()


async def test_unlocked_behind_the_handles_back_is_lost(db_url: str) -> None:
    holder_name = unique_name()
    held = await locker(db_url, holder_name).try_acquire(KEY)
    assert held is not None
    assert isinstance(held, AdvisoryLock)
    # Simulate the session losing the lock while the connection stays up.
    await held._conn.execute("SELECT pg_advisory_unlock_all()")
    await asyncio.wait_for(held.wait_lost(), 2)
    await held.release()


async def test_unreachable_server_raises_database_unavailable() -> None:
    lk = AdvisoryLocker(
        "postgresql://u:secret@127.0.0.1:1/nowhere", connect_timeout=timedelta(seconds=1)
    )
    with pytest.raises(DatabaseUnavailable) as info:
        await lk.try_acquire(KEY)
    assert "secret" not in str(info.value)
