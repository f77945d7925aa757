"""The charts' roll-up: outcome events folded once each into per-minute rows, and read back."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import psycopg
import pytest
from tests.integration.test_maintenance import NoLocker

from jobrun.config import Config
from jobrun.domain import JobState, NewJob
from jobrun.maintenance import Maintenance
from jobrun.postgres import Pool
from jobrun.postgres.lock import AdvisoryLocker
from jobrun.postgres.store import Store
from jobrun.rollup import Rollup
from jobrun.testing import eventually

LEASE = timedelta(seconds=30)


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


async def run(store: Store, queue: str, type: str, *, outcome: str, attempts: int = 3) -> None:
    """Enqueue one job and take it through one attempt ending in ``outcome``."""
    await store.enqueue(NewJob(type=type, queue=queue, max_attempts=attempts))
    (job,) = await store.claim([queue], "w1", 1, LEASE)
    if outcome == "succeeded":
        await store.complete(job, "w1")
    else:
        await store.fail(job, "w1", "boom")


async def totals(store: Store) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    since = (await store.now()) - timedelta(hours=1)
    return {
        (row.queue, row.type): (
            row.outcomes.succeeded,
            row.outcomes.failed,
            row.outcomes.dead,
            row.outcomes.cancelled,
        )
        for row in await store.stats_by_type(since, timedelta(minutes=1))
    }


async def test_each_outcome_is_counted_once_by_queue_and_type_with_its_durations(
    store: Store,
) -> None:
    for _ in range(3):
        await run(store, "billing/eu", "invoice", outcome="succeeded")
    await run(store, "billing/eu", "invoice", outcome="failed")  # retried later: failed
    await run(store, "mail/../x", "mail", outcome="failed", attempts=1)  # none left: dead
    cancelled = await store.enqueue(NewJob(type="mail", queue="mail/../x"))
    await store.cancel(cancelled.id)

    rollup = Rollup(store, batch=2)  # several folding transactions
    assert await rollup.catch_up() == 6
    assert await totals(store) == {
        ("billing/eu", "invoice"): (3, 1, 0, 0),
        ("mail/../x", "mail"): (0, 0, 1, 1),
    }
    # Nothing new: a second roll-up counts nothing again.
    assert await rollup.catch_up() == 0
    assert await Rollup(store).catch_up() == 0
    assert (await totals(store))[("billing/eu", "invoice")] == (3, 1, 0, 0)

    since = await store.now() - timedelta(hours=1)
    by_type = await store.stats_by_type(since, timedelta(minutes=10))
    (invoices,) = [r for r in by_type if r.type == "invoice"]
    # The three successes have a run time and a queue wait; the failed attempt,
    # which did not end its job, has neither.
    assert invoices.run.count == 3
    assert invoices.wait.count == 3
    run_p99 = invoices.run.percentile(99)
    assert run_p99 is not None and run_p99 < timedelta(minutes=1)

    now = await store.now()
    series = await store.stats_series(now - timedelta(hours=1), timedelta(minutes=1))
    assert sum(point.outcomes.succeeded for point in series) == 3
    assert sum(point.outcomes.attempts for point in series) == 5
    only_mail = await store.stats_series(
        now - timedelta(hours=1), timedelta(minutes=1), queue="mail/../x", type="mail"
    )
    assert sum(point.outcomes.dead for point in only_mail) == 1
    assert sum(point.outcomes.succeeded for point in only_mail) == 0
    minutes = await store.outcomes_per_minute(now - timedelta(hours=1))
    billing = [o for o in minutes["billing/eu"].values()]
    assert sum(o.succeeded for o in billing) == 3 and sum(o.failed for o in billing) == 1
    mail = [o for o in minutes["mail/../x"].values()]
    assert (sum(o.dead for o in mail), sum(o.cancelled for o in mail)) == (1, 1)
    assert await store.parked_per_queue() == {
        "mail/../x": {JobState.DEAD: 1, JobState.CANCELLED: 1}
    }


async def test_an_event_committed_after_a_later_one_is_not_passed_over(
    store: Store, db_url: str
) -> None:
    """A transaction holding an outcome event open keeps the horizon below it; once it
    commits, the next turn counts it (ids are handed out before commit)."""
    await store.enqueue(NewJob(type="slow", queue="q"))
    (slow,) = await store.claim(["q"], "w1", 1, LEASE)
    rollup = Rollup(store)
    async with await psycopg.AsyncConnection.connect(db_url) as holder:
        # The completion's event is written, with its id, but not committed.
        await holder.execute(
            "INSERT INTO job_events (job_id, kind, from_state, to_state, attempt) "
            "VALUES (%s, 'succeeded', 'leased', 'succeeded', 1)",
            (slow.id,),
        )
        # A later outcome, committed at once.
        await run(store, "q", "fast", outcome="succeeded")
        counted = 0
        for _ in range(3):
            counted += await rollup.tick()
        assert counted == 0, "nothing is folded while an event below the horizon is in flight"
        await holder.commit()
    assert await rollup.catch_up() == 2
    assert (await totals(store))[("q", "slow")] == (1, 0, 0, 0)
    assert (await totals(store))[("q", "fast")] == (1, 0, 0, 0)


async def test_a_long_transaction_that_writes_no_event_does_not_hold_the_charts_back(
    store: Store, db_url: str
) -> None:
    """Only a transaction holding a lock on job_events can still add an event below the
    horizon: an application's long transaction elsewhere is not waited for."""
    async with await psycopg.AsyncConnection.connect(db_url) as other:
        # A transaction with an id of its own (it wrote), open for the whole test.
        await other.execute("CREATE TEMP TABLE elsewhere (n int)")
        await other.execute("INSERT INTO elsewhere VALUES (1)")
        for _ in range(2):
            await run(store, "q", "quick", outcome="succeeded")
        counted = await asyncio.wait_for(Rollup(store).catch_up(), timeout=30)
        assert counted == 2
        assert (await totals(store))[("q", "quick")] == (2, 0, 0, 0)


async def test_two_leaders_rolling_up_at_once_count_each_event_once(store: Store) -> None:
    for i in range(40):
        await run(store, "q", f"t{i % 4}", outcome="succeeded")
    first, second = Rollup(store, batch=3), Rollup(store, batch=5)
    counted = await asyncio.gather(first.catch_up(), second.catch_up())
    assert sum(counted) == 40
    assert sum(s for s, _, _, _ in (await totals(store)).values()) == 40


async def test_events_of_purged_jobs_and_claims_count_nothing(store: Store, db_url: str) -> None:
    await run(store, "q", "gone", outcome="succeeded")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("DELETE FROM jobs WHERE type = 'gone'")
    await store.enqueue(NewJob(type="running", queue="q"))
    await store.claim(["q"], "w1", 1, LEASE)
    assert await Rollup(store).catch_up() == 0
    assert await totals(store) == {}


async def test_old_rows_are_pruned_by_their_widths_age_and_recent_ones_kept(
    store: Store, db_url: str
) -> None:
    await run(store, "q", "t", outcome="succeeded")
    await Rollup(store).catch_up()
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        # Three old rows of each width, 9 to 11 days old.
        await conn.execute(
            "INSERT INTO job_stats (width, at, queue, type, succeeded, wait_ms, run_ms) "
            "SELECT w, date_trunc('hour', now()) - make_interval(days => d), 'q', 't', 1, "
            "array_fill(0::bigint, ARRAY[48]), array_fill(0::bigint, ARRAY[48]) "
            "FROM generate_series(9, 11) AS d, unnest(ARRAY[1, 10, 60]) AS w"
        )
    assert await store.prune_stats_batch(60, timedelta(days=8), 2) == 2
    assert await store.prune_stats_batch(60, timedelta(days=8), 2) == 1
    assert await store.prune_stats_batch(60, timedelta(days=8), 2) == 0
    assert await store.prune_stats_batch(1, timedelta(days=10), 5) == 2  # 10 and 11 days
    pruned = await Maintenance(store, NoLocker(), Config(), pause=timedelta(0)).prune_once()
    assert pruned.stats == 4  # what was left of widths 1 and 10
    for step in (1, 10, 60):
        totals_now = {
            (r.queue, r.type): r.outcomes.succeeded
            for r in await store.stats_by_type(
                await store.now() - timedelta(hours=2), timedelta(minutes=step)
            )
        }
        assert totals_now == {("q", "t"): 1}, step


async def test_the_outcomes_counted_agree_with_the_jobs_states(store: Store, db_url: str) -> None:
    for i in range(12):
        await run(store, "mixed", "t", outcome="succeeded" if i % 3 else "failed", attempts=1)
    await Rollup(store).catch_up()
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'), "
            "count(*) FILTER (WHERE state = 'dead') FROM jobs WHERE queue = 'mixed'"
        )
        states = await cur.fetchone()
    succeeded, _, dead, _ = (await totals(store))[("mixed", "t")]
    assert states == (succeeded, dead) == (8, 4)


async def test_a_run_time_and_a_wait_land_in_the_buckets_that_hold_them(
    store: Store, db_url: str
) -> None:
    """A run of 2 s reads back as at least 2 s and under 2.83 s (a bucket is a factor
    of 1.41 wide); a wait of 90 s likewise."""
    job = await store.enqueue(NewJob(type="timed", queue="q"))
    (claimed,) = await store.claim(["q"], "w1", 1, LEASE)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE job_events SET at = at - interval '2 seconds' "
            "WHERE job_id = %s AND kind = 'claimed'",
            (job.id,),
        )
        await conn.execute(
            "UPDATE jobs SET run_at = run_at - interval '92 seconds' WHERE id = %s", (job.id,)
        )
    await store.complete(claimed, "w1")
    await Rollup(store).catch_up()
    (timed,) = await store.stats_by_type(
        await store.now() - timedelta(hours=1), timedelta(minutes=60)
    )
    run_p50, wait_p50 = timed.run.percentile(50), timed.wait.percentile(50)
    assert run_p50 is not None and timedelta(seconds=2) <= run_p50 < timedelta(seconds=2.83)
    assert wait_p50 is not None and timedelta(seconds=90) <= wait_p50 < timedelta(seconds=127.3)


async def test_without_claim_events_outcomes_are_counted_with_no_durations(pool: Pool) -> None:
    # Event mode "terminal" records no claims: a succeeded job then has no run
    # time or queue wait, and must not be counted in the histograms' first bucket.
    store = Store(pool, event_mode="terminal")
    for _ in range(2):
        await run(store, "quiet", "ping", outcome="succeeded")
    assert await Rollup(store).catch_up() == 2

    since = await store.now() - timedelta(hours=1)
    (pings,) = await store.stats_by_type(since, timedelta(minutes=1))
    assert pings.outcomes.succeeded == 2
    assert pings.run.count == 0
    assert pings.wait.count == 0


@pytest.mark.parametrize("charts", [True, False], ids=["charts-on", "charts-off"])
async def test_the_leader_folds_outcomes_only_with_charts_on(
    db_url: str, store: Store, charts: bool
) -> None:
    await run(store, "billing", "invoice", outcome="succeeded")
    quick = timedelta(milliseconds=50)
    maintenance = Maintenance(
        store,
        AdvisoryLocker(db_url, application_name="jobrun-charts-test"),
        Config(charts=charts, maintenance_every=quick),
        rollup_every=quick,
        statistics_every=quick,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(maintenance.run(stop))
    try:
        if charts:
            await eventually(lambda: store.stats_cursor(), what="the roll-up's cursor moved")
        # Each pass comes after a roll-up's turn was due: by the third, one has folded.
        await eventually(lambda: maintenance.passes >= 3, what="three maintenance passes")
        assert bool(await store.stats_cursor()) is charts
    finally:
        stop.set()
        await task


async def test_the_oldest_event_not_rolled_up_says_how_far_the_charts_trail(store: Store) -> None:
    assert await store.stats_unfolded_since() is None  # nothing written, nothing owed
    before = await store.now()
    await run(store, "billing", "invoice", outcome="succeeded")
    since = await store.stats_unfolded_since()
    assert since is not None and before <= since <= await store.now()
    await Rollup(store).catch_up()
    assert await store.stats_unfolded_since() is None
