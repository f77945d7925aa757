"""Queue controls: pause, fleet-wide concurrency limit and rate limit, enforced by the claim.

The store-level tests pin down each control and the serialisation of
concurrent claimers; the process tests run real ``jobrun worker`` processes
and check, from the database while they run, that the controls hold across
all of them.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobrun.domain import JobState, NewJob, Outcome, QueueControls
from jobrun.errors import ConfigurationError
from jobrun.postgres import Pool, SyncProducer
from jobrun.postgres.store import Store
from jobrun.sqlc import jobs as job_queries

HERE = Path(__file__).parent
LEASE = timedelta(seconds=60)


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


async def query(pool: Pool, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    async with pool.connection() as conn:
        cur = await conn.execute(sql, params)
        return await cur.fetchall()


async def enqueue(store: Store, queue: str, n: int, sleep: float = 0.2) -> None:
    await store.enqueue_batch(
        [NewJob(type="nap", queue=queue, payload={"sleep": sleep}) for _ in range(n)]
    )


def claim_params(queues: list[str], limit: int, now: datetime | None) -> Any:
    return job_queries.JobClaimParams(
        queues=queues,
        owner="t",
        max_jobs=limit,
        lease=LEASE,
        now=now,
        offer_channel=None,
        offer_lease=LEASE,
        offer_ttl=timedelta(0),
        record_events=True,
    )


# -- the store ----------------------------------------------------------------------


async def test_queues_need_no_row_and_list_shows_controls_and_load(store: Store) -> None:
    await enqueue(store, "mail", 3)
    assert [q.name for q in await store.list_queues()] == ["mail"]
    assert len(await store.claim(["mail"], "w", 1, LEASE)) == 1

    limited = await store.set_queue_limits("mail", concurrency=5)
    assert limited == QueueControls(name="mail", concurrency_limit=5)
    # A limit given alone leaves the other one as it was.
    both = await store.set_queue_limits("mail", rate=(10, timedelta(minutes=1)))
    assert (both.concurrency_limit, both.rate_limit, both.rate_interval) == (
        5,
        10,
        timedelta(minutes=1),
    )
    assert (await store.pause_queue("idle")).paused

    listed = {q.name: q for q in await store.list_queues()}
    assert set(listed) == {"idle", "mail"}
    assert (listed["mail"].queued, listed["mail"].leased, listed["mail"].paused) == (2, 1, False)
    assert listed["mail"].concurrency_limit == 5 and listed["mail"].rate_limit == 10
    assert listed["idle"].paused and listed["idle"].queued == 0

    cleared = await store.clear_queue_limits("mail")
    assert (cleared.concurrency_limit, cleared.rate_limit, cleared.rate_interval) == (None,) * 3
    assert not (await store.resume_queue("idle")).paused
    assert await store.clear_queue_limits("never-limited") == QueueControls(name="never-limited")


@pytest.mark.parametrize(
    ("name", "concurrency", "rate", "message"),
    [
        ("q", None, None, "give a concurrency limit, a rate, or both"),
        ("q", 0, None, "concurrency limit must be between 1"),
        ("q", 2**31, None, "concurrency limit must be between 1"),
        ("q", None, (0, timedelta(seconds=1)), "rate count must be between 1"),
        ("q", None, (5, timedelta(0)), "rate interval must be positive"),
        ("", 1, None, "queue name must not be empty"),
        ("x" * 129, 1, None, "at most 128"),
        ("a\x00b", 1, None, "NUL"),
    ],
)
async def test_bad_limits_are_refused_before_the_database(
    store: Store, pool: Pool, name: str, concurrency: Any, rate: Any, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        await store.set_queue_limits(name, concurrency=concurrency, rate=rate)
    assert await query(pool, "SELECT count(*) FROM queues") == [(0,)]


@pytest.mark.parametrize(
    ("concurrency", "rate", "message"),
    [
        (2.5, None, "concurrency limit must be a whole number, got 2.5"),
        (True, None, "concurrency limit must be a whole number, got True"),
        ("3", None, "concurrency limit must be a whole number, got '3'"),
        (None, (5.5, timedelta(seconds=1)), "rate count must be a whole number, got 5.5"),
        (None, (False, timedelta(seconds=1)), "rate count must be a whole number, got False"),
        (None, (5, 1), "rate interval must be a timedelta, got 1"),
        (None, (5,), "rate must be \\(count, interval\\)"),
    ],
)
async def test_limits_that_are_not_whole_numbers_are_refused_by_both_stores(
    store: Store, pool: Pool, db_url: str, concurrency: Any, rate: Any, message: str
) -> None:
    # Not rounded (2.5 stored as 2, 5.5 as 6), not a driver error (True): refused, unwritten.
    with pytest.raises(ConfigurationError, match=message):
        await store.set_queue_limits("q", concurrency=concurrency, rate=rate)
    with SyncProducer(db_url) as sync_store, pytest.raises(ConfigurationError, match=message):
        sync_store.set_queue_limits("q", concurrency=concurrency, rate=rate)
    assert await query(pool, "SELECT count(*) FROM queues") == [(0,)]


async def test_a_paused_queue_yields_nothing_while_another_runs_on(store: Store) -> None:
    await enqueue(store, "a", 3)
    await enqueue(store, "b", 3)
    running = await store.claim(["a"], "w", 1, LEASE)
    await store.pause_queue("a")

    claimed = await store.claim(["a", "b"], "w", 10, LEASE)
    assert {j.queue for j in claimed} == {"b"} and len(claimed) == 3
    # A job leased before the pause finishes normally.
    (done,) = await store.record_outcomes("w", [Outcome(job=running[0])])
    assert not isinstance(done, Exception) and done.state is JobState.SUCCEEDED

    await store.resume_queue("a")
    assert len(await store.claim(["a"], "w", 10, LEASE)) == 2


async def test_concurrency_limit_caps_leased_jobs_of_the_queue(store: Store) -> None:
    await enqueue(store, "limited", 10)
    await enqueue(store, "free", 10)
    await store.set_queue_limits("limited", concurrency=3)

    first = await store.claim(["limited", "free"], "w1", 20, LEASE)
    assert sum(j.queue == "limited" for j in first) == 3
    assert sum(j.queue == "free" for j in first) == 10  # other queues are not held back
    assert await store.claim(["limited"], "w2", 5, LEASE) == []

    held = [j for j in first if j.queue == "limited"]
    await store.record_outcomes("w1", [Outcome(job=held[0])])
    assert len(await store.claim(["limited"], "w2", 5, LEASE)) == 1

    # Lowered below what is leased: nothing more until it drains below the limit.
    await store.set_queue_limits("limited", concurrency=1)
    assert await store.claim(["limited"], "w2", 5, LEASE) == []


async def test_a_claimer_waiting_on_the_queue_lock_counts_the_leases_before_it(
    store: Store, pool: Pool
) -> None:
    # A claim holds the limited queue's row until it commits. A second claim
    # that started meanwhile must wait, then count the first one's leases,
    # although they committed after its own statement began. Without the row
    # lock it would not wait; counting with the statement's snapshot it would
    # see no leases; either way it would take 3 more.
    await enqueue(store, "limited", 10)
    await store.set_queue_limits("limited", concurrency=3)
    async with pool.connection() as first:
        await first.set_autocommit(False)
        rows = await job_queries.AsyncQuerier(first).job_claim(
            params=claim_params(["limited"], 10, None)
        )
        assert len(rows) == 3
        second = asyncio.create_task(store.claim(["limited"], "w2", 10, LEASE))
        await asyncio.sleep(0.5)
        assert not second.done(), "the second claim did not wait for the queue's row"
        await first.commit()
    assert await asyncio.wait_for(second, 10) == []
    leased = await query(pool, "SELECT count(*) FROM jobs WHERE state = 'leased'")
    assert leased == [(3,)]


async def test_rate_limit_counts_claims_in_fixed_windows(store: Store, pool: Pool) -> None:
    await enqueue(store, "rated", 100)
    await store.set_queue_limits("rated", rate=(20, timedelta(seconds=10)))
    window = datetime(2030, 1, 1, 0, 0, 10, tzinfo=UTC)  # a multiple of 10 s since the epoch

    async def claim(at: datetime, limit: int = 100) -> int:
        async with pool.connection() as conn:
            rows = await job_queries.AsyncQuerier(conn).job_claim(
                params=claim_params(["rated"], limit, at)
            )
        return len(rows)

    assert await claim(window + timedelta(seconds=1), limit=15) == 15
    assert await claim(window + timedelta(seconds=2)) == 5
    assert await claim(window + timedelta(seconds=9.999)) == 0
    assert await claim(window + timedelta(seconds=10)) == 20  # the next window
    # A claim whose clock is in a window before the one the row counts (a
    # claimer that waited for the lock) takes nothing.
    assert await claim(window + timedelta(seconds=5)) == 0
    assert await query(pool, "SELECT window_start, window_claims FROM queues") == [
        (window + timedelta(seconds=10), 20)
    ]


async def claimed_at(pool: Pool, queue: str, at: datetime, limit: int = 100) -> int:
    async with pool.connection() as conn:
        rows = await job_queries.AsyncQuerier(conn).job_claim(
            params=claim_params([queue], limit, at)
        )
    return len(rows)


async def test_a_longer_rate_interval_starts_a_fresh_window_at_once(
    store: Store, pool: Pool
) -> None:
    await enqueue(store, "rated", 30)
    await store.set_queue_limits("rated", rate=(2, timedelta(seconds=1)))
    at = datetime(2030, 1, 1, 0, 34, 56, 200_000, tzinfo=UTC)
    assert await claimed_at(pool, "rated", at) == 2
    assert await claimed_at(pool, "rated", at + timedelta(seconds=0.1)) == 0
    await store.set_queue_limits("rated", rate=(5, timedelta(hours=1)))
    # The counter named a one-second window, later than the hour's start:
    # the new rate counts from now, not from the next hour.
    assert await claimed_at(pool, "rated", at + timedelta(seconds=0.2)) == 5
    assert await claimed_at(pool, "rated", at + timedelta(minutes=20)) == 0
    assert await claimed_at(pool, "rated", datetime(2030, 1, 1, 1, tzinfo=UTC)) == 5


async def test_a_new_count_over_the_same_interval_keeps_the_window_s_claims(
    store: Store, pool: Pool
) -> None:
    await enqueue(store, "rated", 30)
    await store.set_queue_limits("rated", rate=(2, timedelta(seconds=10)))
    at = datetime(2030, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert await claimed_at(pool, "rated", at) == 2
    await store.set_queue_limits("rated", rate=(5, timedelta(seconds=10)))
    assert await claimed_at(pool, "rated", at + timedelta(seconds=1)) == 3


async def test_a_counter_left_in_a_former_interval_s_window_is_a_fresh_window(
    store: Store, pool: Pool
) -> None:
    await enqueue(store, "rated", 30)
    await store.set_queue_limits("rated", rate=(2, timedelta(seconds=1)))
    at = datetime(2030, 1, 1, 0, 34, 56, 200_000, tzinfo=UTC)
    assert await claimed_at(pool, "rated", at) == 2
    # A row as a rate change left it before the change reset the counter:
    # a window of the old one-second interval under the new hour.
    await query(pool, "UPDATE queues SET rate_limit = 5, rate_interval = '1 hour' RETURNING 1")
    assert await claimed_at(pool, "rated", at + timedelta(seconds=0.2)) == 5
    assert await query(pool, "SELECT window_start, window_claims FROM queues") == [
        (datetime(2030, 1, 1, tzinfo=UTC), 5)
    ]


async def test_the_leased_count_reads_the_leased_index(store: Store, pool: Pool) -> None:
    for queue in ("a", "b", "c", "d"):
        await enqueue(store, queue, 2000)
    await store.claim(["a"], "w", 50, LEASE)
    async with pool.connection() as conn:
        await conn.execute("ANALYZE jobs")
        cur = await conn.execute(
            "EXPLAIN SELECT count(*)::integer FROM jobs WHERE state = 'leased' AND queue = 'a'"
        )
        plan = "\n".join(r[0] for r in await cur.fetchall())
        # The function's body is the statement above; it must stay what we explain.
        cur = await conn.execute("SELECT prosrc FROM pg_proc WHERE proname = 'queue_leased_count'")
        body = await cur.fetchone()
    assert "jobs_leased_idx" in plan, plan
    assert body is not None and "state = 'leased' AND queue = queue_name" in body[0]


# -- real worker processes ---------------------------------------------------------------


@pytest.fixture
def workers(db_url: str) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(*queues: str, concurrency: int = 10) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "jobrun", "worker", "--app", "queue_app"]
        for queue in queues:
            args += ["--queue", queue]
        args += ["--concurrency", str(concurrency), "--poll", "50ms", "--database-url", db_url]
        args += ["--log-level", "warning"]
        env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        proc = subprocess.Popen(args, env=env)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def count_state(pool: Pool, queue: str, state: str) -> int:
    rows = await query(
        pool, "SELECT count(*) FROM jobs WHERE queue = %s AND state = %s::job_state", queue, state
    )
    return int(rows[0][0])


@pytest.mark.slow
async def test_four_workers_never_exceed_the_concurrency_limit(
    store: Store, pool: Pool, workers: Any
) -> None:
    total = 60
    await store.set_queue_limits("limited", concurrency=3)
    await enqueue(store, "limited", total, sleep=0.2)
    # Each process could run two at a time, eight together: the limit of 3
    # is what binds, and 3 leased at once can only be leases of two processes
    # or more. (At 10 per process one process could hold every slot, and
    # whether it did was a matter of timing.)
    for _ in range(4):
        workers("limited", concurrency=2)

    samples: list[int] = []
    deadline = time.monotonic() + 90
    while await count_state(pool, "limited", "succeeded") < total:
        assert time.monotonic() < deadline, f"jobs not done; leased samples {samples[-20:]}"
        samples.append(await count_state(pool, "limited", "leased"))
        await asyncio.sleep(0.02)

    assert max(samples) <= 3, max(samples)
    # The limit was actually reached, so the samples could have seen a breach.
    assert max(samples) == 3
    owners = await query(
        pool, "SELECT count(DISTINCT owner) FROM job_events WHERE kind = 'claimed'"
    )
    assert owners[0][0] >= 2  # the slots were shared across processes (see above)


@pytest.mark.slow
async def test_rate_limit_holds_over_a_measured_interval(
    store: Store, pool: Pool, workers: Any
) -> None:
    total, per_second = 200, 20
    await store.set_queue_limits("rated", rate=(per_second, timedelta(seconds=1)))
    await enqueue(store, "rated", total, sleep=0.0)
    for _ in range(4):
        workers("rated", concurrency=10)

    deadline = time.monotonic() + 60
    while await count_state(pool, "rated", "succeeded") < total:
        assert time.monotonic() < deadline, "jobs not done"
        await asyncio.sleep(0.2)

    rows = await query(
        pool, "SELECT extract(epoch FROM at)::float8 FROM job_events WHERE kind = 'claimed'"
    )
    claims = sorted(r[0] for r in rows)
    assert len(claims) == total
    # The limiter's windows are the epoch-aligned seconds of the claim's
    # database clock, which is also the claimed event's time: per such
    # window the limit is exact, no tolerance.
    per_window: dict[int, int] = {}
    for at in claims:
        per_window[int(at // 1)] = per_window.get(int(at // 1), 0) + 1
    assert max(per_window.values()) <= per_second, per_window
    # Any sliding second spans at most two windows: at most twice the rate
    # (the documented precision of a fixed window).
    sliding = max(sum(1 for other in claims[i:] if other < at + 1.0) for i, at in enumerate(claims))
    assert sliding <= 2 * per_second, sliding
    # 200 claims at 20 per window need at least 10 windows; from the end of
    # the first to the start of the tenth is just over 8 s.
    assert len(per_window) >= total // per_second
    assert claims[-1] - claims[0] > total / per_second - 2


@pytest.mark.slow
async def test_a_paused_queue_runs_nothing_while_another_runs_on(
    store: Store, pool: Pool, workers: Any
) -> None:
    await store.pause_queue("held")
    await enqueue(store, "held", 20, sleep=0.0)
    await enqueue(store, "flowing", 20, sleep=0.0)
    for _ in range(2):
        workers("held", "flowing", concurrency=10)

    deadline = time.monotonic() + 60
    while await count_state(pool, "flowing", "succeeded") < 20:
        assert time.monotonic() < deadline, "the unpaused queue did not run"
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # several more polls of both workers
    assert await count_state(pool, "held", "queued") == 20

    await store.resume_queue("held")
    while await count_state(pool, "held", "succeeded") < 20:
        assert time.monotonic() < deadline, "the resumed queue did not run"
        await asyncio.sleep(0.1)
