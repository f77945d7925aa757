"""Plans made while a table was small must not outlive its growth.

A session plans each prepared statement once (PostgreSQL keeps the generic
plan) and keeps that plan until the statistics of a table it reads change.
Planned while jobs was nearly empty, the claim joins its picked ids to jobs
by reading the whole table, which is cheapest there; the plan stays when the
table grows, and every claim then reads every row (about 100 times slower at
500,000 rows: scripts/bench-claim --grown 500k). Autovacuum's analyze makes the
sessions plan again within its naptime; on a server without autovacuum, such
as the shared test server, nothing would. These tests reproduce the stale plan
on a session that claimed as the store does, and show that the store's
statistics refresh, run by the maintenance leader (and by ``jobrun worker``:
tests/acceptance/test_cli_worker.py),
puts that same session back on primary-key probes.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from jobrun_tools.claimplan import fill_synthetic
from psycopg import sql
from psycopg.conninfo import make_conninfo

from jobrun.config import Config
from jobrun.maintenance import Maintenance
from jobrun.postgres import Pool, open_pool
from jobrun.postgres.lock import AdvisoryLocker
from jobrun.postgres.store import Store
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc.models import JobState
from jobrun.testing import eventually

CLAIM_MARKER = "WITH RECURSIVE controls AS MATERIALIZED"
# Literals for a prepared claim's parameters, by their type: EXPLAIN EXECUTE
# takes the values, and the plan it shows is the one the session would run.
LITERALS = {
    "text[]": "'{default}'",
    "smallint": "10",
    "integer": "10",
    "timestamp with time zone": "NULL",
    "text": "'stats-test'",
    "interval": "'30 seconds'",
    "boolean": "true",
}


async def connect(db_url: str) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(db_url, autocommit=True)


async def without_autovacuum(db_url: str) -> None:
    """Keep autovacuum (on in the embedded server) from analyzing jobs behind the test."""
    async with await connect(db_url) as conn:
        await conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")


async def claim_as_a_worker(conn: psycopg.AsyncConnection[Any], calls: int = 12) -> None:
    """Claim as the store does, enough times for the session to keep a generic plan."""
    queries = job_queries.AsyncQuerier(conn)
    params = job_queries.JobClaimParams(
        queues=["default"],
        owner="stats-test",
        max_jobs=10,
        lease=timedelta(seconds=30),
        now=None,
        offer_channel=None,
        offer_lease=timedelta(seconds=30),
        offer_ttl=timedelta(0),
        record_events=True,
    )
    for _ in range(calls):
        await queries.job_claim(params=params)


async def claim_scans(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, str | None]]:
    """(node type, relation) of every scan in the plan this session keeps for the claim."""
    cur = await conn.execute(
        "SELECT name, parameter_types::text[], generic_plans FROM pg_prepared_statements "
        "WHERE strpos(statement, %s) > 0",
        (CLAIM_MARKER,),
    )
    rows = await cur.fetchall()
    assert len(rows) == 1, rows
    name, types, generic_plans = rows[0]
    assert generic_plans > 0, "the session should be running the claim's generic plan"
    args = ", ".join(LITERALS[t] for t in types)
    cur = await conn.execute(f"EXPLAIN (FORMAT JSON) EXECUTE {name}({args})")
    row = await cur.fetchone()
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    found: list[tuple[str, str | None]] = []

    def walk(node: dict[str, Any]) -> None:
        if "Scan" in node["Node Type"]:
            found.append((node["Node Type"], node.get("Relation Name")))
        for child in node.get("Plans", []):
            walk(child)

    walk(document[0]["Plan"])
    return found


async def grow(db_url: str, total: int) -> None:
    """Add ``total`` finished jobs, as a busy queue leaves behind."""
    async with await connect(db_url) as conn:
        await fill_synthetic(
            conn, queue="done", total=total, first_id=1, state=JobState.SUCCEEDED,
            finished_at=datetime.now(UTC),
        )  # fmt: skip


async def live_rows_counted(db_url: str, rows: int) -> bool:
    """Whether the server's live-row counter of jobs has caught up with ``rows``."""
    async with await connect(db_url) as conn:
        cur = await conn.execute(
            "SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'jobs'"
        )
        row = await cur.fetchone()
    return row is not None and row[0] >= rows


async def test_a_claim_planned_on_an_empty_table_is_planned_again_once_statistics_are_refreshed(
    db_url: str, pool: Pool
) -> None:
    await without_autovacuum(db_url)
    store = Store(pool)
    async with await connect(db_url) as session:
        await claim_as_a_worker(session)
        assert ("Seq Scan", "jobs") in await claim_scans(session)  # cheapest while empty
        await grow(db_url, 20_000)
        # The hazard: the session keeps reading the whole (now large) table.
        assert ("Seq Scan", "jobs") in await claim_scans(session)

        analyzed = await eventually(store.refresh_statistics)
        assert analyzed == ["jobs"]

        scans = await claim_scans(session)
        assert ("Seq Scan", "jobs") not in scans, scans
        assert ("Index Scan", "jobs") in scans, scans
        # Statistics now describe the table: nothing left to refresh.
        assert await store.refresh_statistics() == []


async def test_a_table_someone_else_is_analyzing_is_skipped_and_analyzed_at_the_next_call(
    db_url: str, pool: Pool
) -> None:
    # ANALYZE (SKIP_LOCKED): a lock another session holds on the table (as a
    # running autovacuum or a manual VACUUM does) makes the refresh skip it
    # at once instead of waiting, and say so; the next call analyzes it.
    await without_autovacuum(db_url)
    store = Store(pool)
    await grow(db_url, 5_000)

    async def last_analyzed() -> bool:
        async with await connect(db_url) as conn:
            cur = await conn.execute(
                "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'jobs'"
            )
            row = await cur.fetchone()
        return row is not None and bool(row[0])

    await eventually(lambda: live_rows_counted(db_url, 5_000))
    async with await psycopg.AsyncConnection.connect(db_url) as holder:
        await holder.execute("LOCK TABLE jobs IN SHARE UPDATE EXCLUSIVE MODE")
        assert await asyncio.wait_for(store.refresh_statistics(), 10) == []
        await holder.rollback()
    assert not await last_analyzed()
    assert await store.refresh_statistics() == ["jobs"]
    assert await eventually(last_analyzed)


async def test_small_growth_does_not_analyze(db_url: str, pool: Pool) -> None:
    await without_autovacuum(db_url)
    store = Store(pool)
    await grow(db_url, 900)  # below the thousand-row floor
    # The server's counters lag a moment: let them see the rows first.
    await eventually(lambda: live_rows_counted(db_url, 900))
    assert await store.refresh_statistics() == []


async def test_a_role_that_may_not_analyze_the_tables_leaves_them_alone(
    db_url: str, pool: Pool
) -> None:
    # Workers may log in as a role that does not own jobrun's tables: ANALYZE
    # would only warn and skip, on every check. Such a role skips them itself.
    await without_autovacuum(db_url)
    await grow(db_url, 5_000)

    await eventually(lambda: live_rows_counted(db_url, 5_000))
    role = f"jobrun_worker_{uuid.uuid4().hex[:10]}"
    async with await connect(db_url) as admin:
        await admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        try:
            async with await open_pool(make_conninfo(db_url, user=role)) as other:
                assert await Store(other).refresh_statistics() == []
            assert await Store(pool).refresh_statistics() == ["jobs"]
        finally:
            await admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            await admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_the_maintenance_leader_refreshes_the_statistics_of_a_grown_table(
    db_url: str, pool: Pool
) -> None:
    await without_autovacuum(db_url)
    maintenance = Maintenance(
        Store(pool),
        AdvisoryLocker(db_url, application_name="jobrun-stats-test"),
        Config(maintenance_every=timedelta(hours=1)),
        statistics_every=timedelta(milliseconds=100),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(maintenance.run(stop))
    try:
        await eventually(lambda: maintenance.is_leader)
        await grow(db_url, 5_000)

        async def analyzed() -> list[str]:
            return maintenance.analyzed

        assert await eventually(analyzed) == ["jobs"]
        assert maintenance.passes == 1  # the hourly prune ran once; the refresh ran between
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    async with await connect(db_url) as conn:
        cur = await conn.execute(
            "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'jobs'"
        )
        assert await cur.fetchone() == (True,)
