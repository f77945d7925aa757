"""The claim's plan: an idle claim's cost must not follow the number of delayed jobs.

The statements that change leased jobs under the lease fence must find each
job by its primary key, whatever the statistics say (the last test).

Which jobs a claim returns is checked in test_store.py; how much it reads to
find them is a plan property no result can show. A claim that finds nothing
due must not walk the delayed entries of its queue, so these tests read the
claim's EXPLAIN (ANALYZE, BUFFERS) through jobrun_tools.claimplan, and
compare buffer counts, never times.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from jobrun_tools.claimplan import (
    CHECK_MAX_BUFFERS,
    FENCE_CHECK_BATCH,
    analyze_jobs,
    check_fenced_updates,
    check_idle_claim,
    claim_plan_reuse,
    explain_claim,
    fill_synthetic,
)

from jobrun.domain import JobState as DomainJobState
from jobrun.domain import NewJob, Outcome, OutcomeKind
from jobrun.errors import LeaseLost
from jobrun.postgres import Pool, Store
from jobrun.postgres.convert import job_from_row
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc.models import JobState


@pytest.fixture
async def conn(db_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as opened:
        yield opened


async def count_jobs(conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute("SELECT count(*) FROM jobs")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_idle_claim_check_passes_and_leaves_no_row(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    check = await check_idle_claim(conn)
    assert check.ok, check
    assert check.buffers <= CHECK_MAX_BUFFERS
    # The loose index scan over priority levels is the plan that makes it so.
    assert "Recursive Union" in check.node_types
    assert await count_jobs(conn) == 0


async def test_idle_claim_reads_as_much_with_ten_times_the_delayed_jobs(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    readings = []
    first_id = 1
    for total in (2_000, 18_000):
        await fill_synthetic(
            conn, queue="q", total=total, first_id=first_id, priorities=3,
            run_in=timedelta(hours=1),
        )  # fmt: skip
        first_id += total
        await analyze_jobs(conn)
        await explain_claim(conn, ["q"], 10)  # sets hint bits on the new rows
        plan = await explain_claim(conn, ["q"], 10)
        readings.append(plan.buffers)
    # 2,000 then 20,000 delayed jobs over the same 3 levels: the same 7 index
    # descents (4 probes for the next level, 3 range scans), each at most one
    # page deeper as the index grows, and far fewer pages than a walk of the
    # delayed entries would read.
    assert readings[1] - readings[0] <= 7, readings
    cur = await conn.execute("SELECT pg_relation_size('jobs_claim_idx') / 8192")
    row = await cur.fetchone()
    assert row is not None
    assert readings[1] * 2 < row[0], (readings, row[0])


async def test_explain_claim_claims_nothing(conn: psycopg.AsyncConnection[Any]) -> None:
    await fill_synthetic(conn, queue="q", total=5, first_id=1, run_in=timedelta(hours=-1))
    plan = await explain_claim(conn, ["q"], 10)
    assert plan.plan["Actual Rows"] == 5
    cur = await conn.execute("SELECT count(*) FROM jobs WHERE state = 'queued'")
    row = await cur.fetchone()
    assert row is not None and row[0] == 5


async def test_the_claim_settles_on_its_generic_plan_instead_of_planning_every_call(
    db_url: str,
) -> None:
    # A fresh session: only the claim is prepared on it. Before the queue list
    # and max_jobs were hidden from the planner, all 20 calls were custom plans
    # (planning cost about as much as running the claim).
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as fresh:
        reuse = await claim_plan_reuse(fresh, ["q1", "q2"], calls=20)
    # psycopg prepares it on the 6th call; PostgreSQL tries 5 custom plans.
    assert (reuse.custom_plans, reuse.generic_plans) == (5, 10), reuse


async def test_the_generic_claim_plan_reads_little_on_a_small_table_of_finished_jobs(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    # With the LIMIT hidden, the planner may guess a tenth of a big estimate
    # of picked rows; joining those to jobs by a hash join read the whole
    # table (708 buffers on 10,000 rows in scripts/bench-claim) until the
    # update took its ids as an array, probed by primary key.
    async with conn.transaction(force_rollback=True):
        await fill_synthetic(
            conn, queue="done", total=10_000, first_id=1, state=JobState.SUCCEEDED,
            finished_at=datetime.now(UTC),
        )  # fmt: skip
        await fill_synthetic(conn, queue="q", total=5, first_id=20_000)
        await analyze_jobs(conn)
        plan = await explain_claim(conn, ["q"], 10)
    assert plan.buffers < 150, plan.buffers
    assert "jobs" not in plan.seq_scanned(), plan.seq_scanned()


async def claim_dead_entries(store: Store, count: int) -> None:
    """Enqueue ``count`` jobs due now in queue q and claim them all: each claim leaves
    the queued version's entry in jobs_claim_idx dead, at the head of its level."""
    await store.enqueue_many("t", [{}] * count, queue="q")
    claimed = 0
    while claimed < count:
        got = await store.claim(["q"], "dead-entries", 500, timedelta(minutes=5))
        assert got, "the enqueued jobs are due"
        claimed += len(got)


async def idle_claim_buffers(conn: psycopg.AsyncConnection[Any]) -> int:
    await explain_claim(conn, ["q"], 10)  # sets hint bits and kills dead entries
    return (await explain_claim(conn, ["q"], 10)).buffers


async def test_a_vacuum_of_a_big_table_cleans_the_claim_index_of_claimed_jobs(
    conn: psycopg.AsyncConnection[Any], pool: Pool
) -> None:
    # On a table this big, the jobs claimed below leave dead rows on fewer
    # than 2% of its pages, and a VACUUM left to its default (INDEX_CLEANUP
    # auto) skips the indexes: every later claim steps over the dead entries
    # at the head of the level. Migration 00013 makes every vacuum of jobs
    # clean them. The control (the setting reset) shows this test can tell.
    await fill_synthetic(
        conn, queue="history", total=400_000, first_id=1, state=JobState.SUCCEEDED,
        finished_at=datetime.now(UTC),
    )  # fmt: skip
    await fill_synthetic(conn, queue="q", total=100, first_id=500_000, run_in=timedelta(days=1))
    await conn.execute("VACUUM ANALYZE jobs")
    store = Store(pool)
    before = await idle_claim_buffers(conn)

    await claim_dead_entries(store, 3_000)
    await conn.execute("VACUUM jobs")
    cleaned = await idle_claim_buffers(conn)
    # A few pages more than before at most (the emptied leaf pages the vacuum
    # unlinked leave the probe a page or so to step over), not the 3,000 entries.
    assert cleaned <= before + 5, (before, cleaned)

    await conn.execute("ALTER TABLE jobs RESET (vacuum_index_cleanup)")
    await claim_dead_entries(store, 3_000)
    await conn.execute("VACUUM jobs")
    skipped = await idle_claim_buffers(conn)
    # Left in place, the 3,000 entries are about thirty pages the probe reads.
    assert skipped >= cleaned + 20, (before, cleaned, skipped)


# -- the claim's commit does not wait for its WAL flush ------------------------------------


async def test_a_claim_commits_asynchronously_in_its_own_transaction_only(
    db_url: str, pool: Pool
) -> None:
    await Store(pool).enqueue(NewJob(type="t"))
    async with await psycopg.AsyncConnection.connect(db_url) as tx:
        rows = await job_queries.AsyncQuerier(tx).job_claim(params=claim_params("w1"))
        assert len(rows) == 1
        setting = await (await tx.execute("SHOW synchronous_commit")).fetchone()
        assert setting == ("off",), "the claim's transaction commits without a flush wait"
        await tx.commit()
        setting = await (await tx.execute("SHOW synchronous_commit")).fetchone()
        assert setting == ("on",), "the session keeps the server's setting"


async def test_a_claim_the_server_forgot_leaves_the_job_queued_and_its_effect_unrun(
    db_url: str, pool: Pool
) -> None:
    # A crash before the claim's WAL reached disk forgets the claim, as a
    # rollback does: the job is as it was, and the attempt the worker went on
    # with is refused at completion, its commit callback never run.
    store = Store(pool)
    job = await store.enqueue(NewJob(type="t"))
    async with await psycopg.AsyncConnection.connect(db_url) as tx:
        (row,) = await job_queries.AsyncQuerier(tx).job_claim(params=claim_params("w1"))
        await tx.rollback()
    forgotten = job_from_row(row)
    assert forgotten.attempts == 1
    ran: list[Any] = []

    async def effect(conn: Any) -> None:
        ran.append(conn)

    (result,) = await store.record_outcomes(
        "w1", [Outcome(job=forgotten, kind=OutcomeKind.COMPLETE, commit=effect)]
    )
    assert isinstance(result, LeaseLost)
    assert ran == []
    stored = await store.get(job.id)
    assert (stored.state, stored.attempts) == (DomainJobState.QUEUED, 0)
    (again,) = await store.claim(["default"], "w2", 1, timedelta(seconds=30))
    assert (again.id, again.attempts) == (job.id, 1)


def claim_params(owner: str) -> job_queries.JobClaimParams:
    return job_queries.JobClaimParams(
        queues=["default"],
        max_jobs=10,
        now=None,
        owner=owner,
        lease=timedelta(seconds=30),
        offer_channel=None,
        offer_lease=timedelta(seconds=30),
        offer_ttl=timedelta(0),
        record_events=True,
    )


async def test_heartbeat_and_outcomes_probe_each_job_by_key_on_statistics_with_none_leased(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    # Statistics taken while no job was leased put "leased by this owner" at
    # one row; a plan that believed them drove the update from a scan of
    # jobs and compared batch x leased rows (273,000 for 500 here; a
    # 1,000-job completion cost 170 ms instead of 10).
    plans = await check_fenced_updates(conn)
    assert [plan.statement for plan in plans] == ["JobHeartbeat", "JobRecordOutcomes"]
    for plan in plans:
        assert plan.ok, plan
        assert plan.changed == FENCE_CHECK_BATCH
        # Every read of jobs is a primary-key probe (outcomes also probe the
        # dependencies of the dependents they free, each by its key).
        assert plan.scans and set(plan.scans) == {"Index Scan using jobs_pkey"}
    assert await count_jobs(conn) == 0
