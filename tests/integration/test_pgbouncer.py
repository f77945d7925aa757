"""jobrun through PgBouncer in transaction mode: workers, the scheduler, faults.

Every test talks to the session's PgBouncer (the ``pgbouncer`` fixture of
this directory's conftest: transaction pooling, four server connections per
database, startup ``options`` refused, the server's time zone not UTC). Each
test checks its outcome in the database itself, over a direct connection.

What must hold behind a transaction-mode bouncer, where consecutive
transactions of one client connection may run on different server
connections:

- the pool keeps nothing in the session (no startup options, no server-side
  prepared statements), so any number of statements in any number of
  transactions works on shared server connections, and timestamps still come
  back in UTC;
- a worker given ``--direct-url`` LISTENs there and wakes on notifications
  sent by producers that go through the bouncer;
- a worker without one polls, and its leader locks are transaction-scoped
  through the bouncer: one scheduler leads among several processes, and a
  killed leader's lock is released with its connection;
- a worker killed mid-job leaves a lease that another worker reaps, and the
  job is retried with its effect committed once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobrun.client import Client
from jobrun.domain import JobState, NewJob, NewSchedule
from jobrun.errors import ConfigurationError, DatabaseUnavailable
from jobrun.postgres import SyncProducer, open_pool
from jobrun.postgres.lock import AdvisoryLocker
from jobrun.postgres.store import Store
from jobrun.registry import JobContext, Registry
from jobrun.scheduler import SCHEDULER_LOCK_KEY

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
Bouncer = Any  # the conftest's Bouncer (conftest modules are not importable by name)

# -- helpers ---------------------------------------------------------------------------


def scalar(db_url: str, query: str, *params: object) -> Any:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def make_counts_table(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bouncer_counts (job_id uuid PRIMARY KEY, n int NOT NULL)")


def wait_until(what: str, check: Any, timeout: float = 60, proc: Any = None) -> Any:
    """Poll ``check()`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"worker exited (status {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


@contextlib.contextmanager
def cli_worker(log: Path, *options: str, env: dict[str, str] | None = None) -> Iterator[Any]:
    """``jobrun worker --app pgbouncer_app`` as a process, stderr to ``log``; killed at exit."""
    environment = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        **(env or {}),
    }
    for name in ("JOBRUN_DATABASE_URL", "JOBRUN_DIRECT_URL", "JOBRUN_PGBOUNCER"):
        if env is None or name not in env:
            environment.pop(name, None)
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "jobrun", "worker", "--app", "pgbouncer_app",
                "--log-level", "info", "--no-maintenance", *options,
            ],
            cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def stop(proc: Any, log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]


def job_states(db_url: str, job_type: str) -> dict[str, int]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT state::text, count(*) FROM jobs WHERE type = %s GROUP BY 1", (job_type,)
        ).fetchall()
    return {str(state): int(n) for state, n in rows}


def listening_backends(db_url: str) -> int:
    """Server sessions of the test's database whose last statement was a LISTEN."""
    return int(
        scalar(
            db_url,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query ILIKE 'LISTEN%%'",
        )
    )


# -- the pool through the bouncer -------------------------------------------------------


async def test_default_pool_sends_startup_options_that_the_bouncer_refuses(
    pgbouncer: Bouncer, db_url: str
) -> None:
    # Why the mode exists: jobrun's usual pool sets the session's time zone
    # and idle limit as startup options, which a stock PgBouncer refuses.
    with pytest.raises(DatabaseUnavailable, match=r"options.*--pgbouncer"):
        await open_pool(pgbouncer.url(db_url), worker_concurrency=1)


async def test_pool_through_the_bouncer_shares_server_connections_without_prepared_statements(
    pgbouncer: Bouncer, db_url: str
) -> None:
    make_counts_table(db_url)
    registry = Registry()

    @registry.handler("count")
    async def count(ctx: JobContext, payload: Any) -> Any:
        job_id = ctx.job.id

        async def commit(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO bouncer_counts (job_id, n) VALUES (%s, 1) "
                "ON CONFLICT (job_id) DO UPDATE SET n = bouncer_counts.n + 1",
                (job_id,),
            )

        return commit

    async with Client(
        registry,
        database_url=pgbouncer.url(db_url),
        pgbouncer=True,
        concurrency=24,
        maintenance=False,
        reap_every=None,
        poll=timedelta(milliseconds=50),
    ) as client:
        async with client.pool.connection() as conn:
            # Statements run more often than psycopg's threshold would prepare
            # them: prepared on one server connection, missing on the next.
            assert conn.prepare_threshold is None
            # The bouncer asks the server for another time zone, and jobrun sets none.
            cur = await conn.execute("SHOW timezone")
            assert await cur.fetchone() == ("America/New_York",)
        store = client.store
        # Single enqueues (each its own transaction, notify included), many at once
        # on 24 client connections over 4 server connections.
        singles = await asyncio.gather(
            *(store.enqueue(NewJob(type="count", payload={"i": i})) for i in range(300))
        )
        # Keyed enqueues, replayed: the replay reads the stored job back.
        keyed = [NewJob(type="count", idempotency_key=f"k{i}") for i in range(100)]
        first = await store.enqueue_batch(keyed)
        again = await store.enqueue_batch(keyed)
        assert [j.id for j in first] == [j.id for j in again]  # type: ignore[union-attr]
        # A plain batch (COPY) in the same pool.
        await store.enqueue_batch([NewJob(type="count", payload={"b": i}) for i in range(600)])

        # The server's time zone is not UTC; jobrun's timestamps still are.
        now = await store.now()
        assert now.tzinfo is UTC
        assert singles[0].created_at.tzinfo is UTC

        stats = await client.run_worker(drain=True)
        assert stats is not None
        # Reads, one transaction each, after hundreds of completion transactions.
        got = await asyncio.gather(*(store.get(job.id) for job in singles[:100]))
        assert {job.state for job in got} == {JobState.SUCCEEDED}

    assert job_states(db_url, "count") == {"succeeded": 1000}
    assert scalar(db_url, "SELECT count(*) FROM bouncer_counts WHERE n = 1") == 1000
    assert scalar(db_url, "SELECT count(*) FROM bouncer_counts WHERE n <> 1") == 0


def test_sync_producer_through_the_bouncer(pgbouncer: Bouncer, db_url: str) -> None:
    with SyncProducer(pgbouncer.url(db_url), pgbouncer=True, max_pool_size=2) as producer:
        singles = [producer.enqueue(NewJob(type="count", payload={"i": i})) for i in range(50)]
        batch = producer.enqueue_batch([NewJob(type="count") for _ in range(50)])
        assert len(batch) == 50
        bulk = producer.enqueue_many("count", [{"n": n} for n in range(50)])
        assert producer.get(bulk[-1]).payload == {"n": 49}
        assert producer.get(singles[-1].id).created_at.tzinfo is UTC
    assert job_states(db_url, "count") == {"queued": 150}


async def test_migrations_go_to_the_direct_url_and_refuse_without_one(
    pgbouncer: Bouncer, empty_db_url: str
) -> None:
    bounced = pgbouncer.url(empty_db_url)
    async with Client(database_url=bounced, pgbouncer=True) as client:
        with pytest.raises(ConfigurationError, match="direct_url"):
            await client.migrate()
    async with Client(database_url=bounced, pgbouncer=True, direct_url=empty_db_url) as client:
        applied = await client.migrate()
        assert applied
        await client.ready()  # the schema, read through the bouncer


# -- workers as processes ---------------------------------------------------------------


def test_cli_worker_with_a_direct_url_listens_there_and_wakes_on_notify(
    pgbouncer: Bouncer, db_url: str, tmp_path: Path
) -> None:
    make_counts_table(db_url)
    bounced = pgbouncer.url(db_url)
    log = tmp_path / "worker.log"
    # An hour between polls: after its first claim the worker claims again only
    # when a notification wakes it.
    with cli_worker(
        log,
        "--pgbouncer", "--database-url", bounced, "--direct-url", db_url,
        "--poll", "1h", "--concurrency", "5",
    ) as proc:  # fmt: skip
        wait_until("the worker started", lambda: "started on queues" in log.read_text(), proc=proc)
        wait_until("the worker listened", lambda: listening_backends(db_url) == 1, proc=proc)
        # A producer through the bouncer, configured by the environment alone.
        enqueue = subprocess.run(
            [sys.executable, "-m", "jobrun", "enqueue", "count", "--payload", "{}"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
            env={**os.environ, "JOBRUN_DATABASE_URL": bounced, "JOBRUN_PGBOUNCER": "1"},
        )  # fmt: skip
        assert enqueue.returncode == 0, enqueue.stderr
        wait_until("the first job ran", lambda: job_states(db_url, "count") == {"succeeded": 1})
        # Enqueued after the first job finished, so after the worker's first
        # claim: with an hour's poll, only a notification can get it claimed.
        asyncio.run(_enqueue_through(bounced, 3))
        wait_until("the notified jobs ran", lambda: job_states(db_url, "count") == {"succeeded": 4})
        stop(proc, log)
    text = log.read_text()
    host, port = pgbouncer.host, pgbouncer.port
    assert f"pool through {host}:{port}/" in text, text
    assert "LISTEN and leader locks direct to" in text, text
    assert scalar(db_url, "SELECT count(*) FROM bouncer_counts WHERE n = 1") == 4


async def _enqueue_through(bounced: str, n: int) -> None:
    async with Client(database_url=bounced, pgbouncer=True, concurrency=1) as client:
        for i in range(n):
            await client.enqueue(NewJob(type="count", payload={"n": i}))


def test_poll_only_cli_worker_through_the_bouncer_processes_jobs_and_never_listens(
    pgbouncer: Bouncer, db_url: str, tmp_path: Path
) -> None:
    make_counts_table(db_url)
    bounced = pgbouncer.url(db_url)
    log = tmp_path / "worker.log"
    # Settings from the environment, as a deployment would set them.
    env = {"JOBRUN_DATABASE_URL": bounced, "JOBRUN_PGBOUNCER": "true"}
    # Two processes under the supervisor: the settings reach the children too.
    with cli_worker(
        log, "--poll", "100ms", "--concurrency", "8", "--processes", "2", env=env
    ) as proc:
        wait_until("the worker started", lambda: "started on queues" in log.read_text(), proc=proc)
        asyncio.run(_enqueue_through(bounced, 200))
        wait_until(
            "every job ran",
            lambda: job_states(db_url, "count") == {"succeeded": 200},
            timeout=120,
            proc=proc,
        )
        assert listening_backends(db_url) == 0
        stop(proc, log)
    text = log.read_text()
    assert text.count("no LISTEN (behind PgBouncer without a direct URL)") == 2, text
    assert scalar(db_url, "SELECT count(*) FROM bouncer_counts WHERE n = 1") == 200


def test_worker_killed_mid_job_through_the_bouncer_is_reaped_and_retried_once(
    pgbouncer: Bouncer, db_url: str, tmp_path: Path
) -> None:
    make_counts_table(db_url)
    bounced = pgbouncer.url(db_url)
    trace = tmp_path / "trace"
    job = asyncio.run(
        _enqueue_one(bounced, NewJob(type="hang_first", payload={"trace": str(trace)}))
    )
    options = ("--pgbouncer", "--database-url", bounced, "--poll", "200ms", "--lease", "3s")
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    with cli_worker(first_log, *options) as first:
        wait_until("the first attempt started", lambda: trace.exists(), proc=first)
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert scalar(db_url, "SELECT state::text FROM jobs WHERE id = %s", job) == "leased"
    with cli_worker(second_log, *options) as second:
        wait_until(
            "the job was retried and succeeded",
            lambda: job_states(db_url, "hang_first") == {"succeeded": 1},
            proc=second,
        )
        stop(second, second_log)
    starts = [line.split() for line in trace.read_text().splitlines()]
    assert [(s[1], s[2]) for s in starts] == [(str(job), "1"), (str(job), "2")]
    assert scalar(db_url, "SELECT n FROM bouncer_counts WHERE job_id = %s", job) == 1


async def _enqueue_one(bounced: str, job: NewJob) -> uuid.UUID:
    async with Client(database_url=bounced, pgbouncer=True, concurrency=1) as client:
        return (await client.enqueue(job)).id


# -- leader election through the bouncer ------------------------------------------------


def scheduler_lock_holders(db_url: str) -> int:
    return int(
        scalar(
            db_url,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND objsubid = 1 AND database = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()) "
            "AND ((classid::bigint << 32) | objid::bigint) = %s",
            SCHEDULER_LOCK_KEY,
        )
    )


def test_two_schedulers_through_the_bouncer_fire_each_run_once_and_fail_over(
    pgbouncer: Bouncer, db_url: str, tmp_path: Path
) -> None:
    bounced = pgbouncer.url(db_url)
    asyncio.run(_create_schedule(bounced))
    options = ("--pgbouncer", "--database-url", bounced, "--scheduler", "--poll", "200ms")
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    with cli_worker(logs[0], *options) as a, cli_worker(logs[1], *options) as b:
        procs = [a, b]
        wait_until("a scheduler leads", lambda: scheduler_lock_holders(db_url) == 1)
        wait_until("two runs fired", lambda: _tick_jobs(db_url) >= 2)
        # One lock, one holder: the lock lives in the leader's open transaction.
        assert scheduler_lock_holders(db_url) == 1
        leader_pid = int(
            scalar(
                db_url,
                "SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                "AND a.datname = current_database() "
                "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s",
                SCHEDULER_LOCK_KEY,
            )
        )
        # The lock lives in the leader's open transaction, which between probes
        # holds no snapshot (no xmin) and no transaction id.
        idle = wait_until(
            "the leader idles in its transaction",
            lambda: _idle_holder(db_url, SCHEDULER_LOCK_KEY),
        )
        assert idle == (None, None)
        # Kill the leading process: the bouncer drops its server connection
        # (a client gone mid-transaction), which releases the lock.
        leading = [
            p for p, log in zip(procs, logs, strict=True) if "scheduler: leading" in log.read_text()
        ]
        assert len(leading) == 1, [log.read_text()[-2000:] for log in logs]
        leader = leading[0]
        leader.send_signal(signal.SIGKILL)
        leader.wait()
        survivor = next(p for p in procs if p is not leader)
        fired = _tick_jobs(db_url)
        wait_until(
            "the survivor leads",
            lambda: (
                scheduler_lock_holders(db_url) == 1
                and scalar(
                    db_url, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", leader_pid
                )
                == 0
            ),
            proc=survivor,
        )
        wait_until("runs fired after the failover", lambda: _tick_jobs(db_url) >= fired + 2)
        stop(survivor, logs[procs.index(survivor)])
    # Every run fired once: one job per scheduled time, and the times are distinct.
    assert (
        scalar(
            db_url,
            "SELECT count(*) FROM (SELECT idempotency_key FROM jobs WHERE type = 'tick' "
            "GROUP BY 1 HAVING count(*) > 1) AS doubled",
        )
        == 0
    )
    assert (
        scalar(db_url, "SELECT count(*) FROM jobs WHERE type = 'tick' AND idempotency_key IS NULL")
        == 0
    )


async def _create_schedule(bounced: str) -> None:
    async with Client(database_url=bounced, pgbouncer=True, concurrency=1) as client:
        await client.store.create_schedule(
            NewSchedule(name="tick", type="tick", every=timedelta(seconds=1))
        )


def _tick_jobs(db_url: str) -> int:
    return int(scalar(db_url, "SELECT count(*) FROM jobs WHERE type = 'tick'"))


# -- the lock itself --------------------------------------------------------------------


async def test_transaction_scoped_lock_through_the_bouncer_excludes_and_releases(
    pgbouncer: Bouncer, db_url: str
) -> None:
    bounced = pgbouncer.url(db_url)
    key = uuid.uuid4().int >> 65
    locker = AdvisoryLocker(bounced, transaction_scoped=True, probe_every=timedelta(seconds=0.2))
    held = await locker.try_acquire(key)
    assert held is not None
    try:
        # Another client of the same bouncer, on another server connection, is refused,
        # however many times it asks (each attempt a transaction of its own).
        for _ in range(5):
            assert await locker.try_acquire(key) is None
        # Plenty of other transactions through the bouncer meanwhile do not disturb it.
        pool = await open_pool(bounced, worker_concurrency=4, pgbouncer=True)
        try:
            store = Store(pool)
            await asyncio.gather(*(store.now() for _ in range(50)))
        finally:
            await pool.close()
        assert not held.lost
        # The holder's transaction sits idle between probes without a snapshot or a
        # transaction id, so hours of leadership hold back no vacuum.
        holder = await asyncio.to_thread(
            wait_until, "the holder idles in its transaction", lambda: _idle_holder(db_url, key)
        )
        assert holder == (None, None)
    finally:
        await held.release()
    again = await locker.try_acquire(key)
    assert again is not None
    await again.release()


def _idle_holder(db_url: str, key: int) -> tuple[Any, Any] | None:
    """(backend_xmin, backend_xid) of the lock's holder once seen idle in its transaction."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT a.state, a.backend_xmin, a.backend_xid FROM pg_locks l "
            "JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND l.granted "
            "AND a.datname = current_database() "
            "AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = %s",
            (key,),
        ).fetchone()
    if row is None or row[0] != "idle in transaction":
        return None
    return (row[1], row[2])
