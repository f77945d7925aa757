"""Connection faults while real worker processes run: nothing lost, nothing twice.

Two `jobrun worker --scheduler` processes work 3,000 jobs whose commit callback
bumps a per-job counter, while the test repeatedly kills every server backend
of the database (pooled connections, the notifier's LISTEN connection, the
scheduler's advisory-lock connection) with pg_terminate_backend.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from jobrun.domain import NewJob, NewSchedule
from jobrun.postgres import Pool
from jobrun.postgres.store import Store

HERE = Path(__file__).parent
JOBS = 3000


def start_worker(db_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobrun",
            "worker",
            "--database-url",
            db_url,
            "--app",
            "fault_app",
            "--scheduler",
            "--concurrency",
            "20",
            "--poll",
            "200ms",
            "--lease",
            "5s",
            "--shutdown-grace",
            "5s",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        # A file, not a pipe: the kills make the workers log a lot, and a full
        # pipe nobody reads would block them.
        stderr=log.open("wb"),
    )


def terminate_backends(db_url: str) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def scalar(db_url: str, query: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(query).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


@pytest.mark.slow
async def test_killed_connections_lose_no_job_and_commit_no_effect_twice(
    pool: Pool, db_url: str, tmp_path: Path
) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE fault_counts (job_id uuid PRIMARY KEY, n int NOT NULL)")
    store = Store(pool)
    await store.enqueue_batch([NewJob(type="count", payload={"i": i}) for i in range(JOBS)])
    await store.create_schedule(NewSchedule(name="tick", type="tick", every=timedelta(seconds=1)))
    await pool.close()

    logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    workers = [start_worker(db_url, log) for log in logs]
    try:
        killed = 0
        for _ in range(8):
            await asyncio.sleep(1.0)
            killed += terminate_backends(db_url)
        assert killed > 0
        last_kill = scalar(db_url, "SELECT extract(epoch FROM now())::bigint")

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = scalar(
                db_url, "SELECT count(*) FROM jobs WHERE type = 'count' AND state = 'succeeded'"
            )
            ticks_after = scalar(
                db_url,
                "SELECT count(*) FROM jobs WHERE type = 'tick' "
                f"AND created_at > to_timestamp({last_kill})",
            )
            if done == JOBS and ticks_after >= 2:
                break
            await asyncio.sleep(0.5)
        for proc in workers:
            assert proc.poll() is None, logs[workers.index(proc)].read_text()[-3000:]
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc in workers:
            proc.wait(timeout=30)

    states = dict(
        psycopg.connect(db_url)
        .execute("SELECT state::text, count(*) FROM jobs WHERE type = 'count' GROUP BY 1")
        .fetchall()
    )
    assert states == {"succeeded": JOBS}
    # Every effect committed exactly once.
    assert scalar(db_url, "SELECT count(*) FROM fault_counts") == JOBS
    assert scalar(db_url, "SELECT count(*) FROM fault_counts WHERE n <> 1") == 0
    # Leadership came back after the last kill, and no run was materialised twice.
    assert (
        scalar(
            db_url,
            "SELECT count(*) FROM jobs WHERE type = 'tick' "
            f"AND created_at > to_timestamp({last_kill})",
        )
        >= 2
    )
    assert (
        scalar(
            db_url,
            "SELECT count(*) FROM (SELECT idempotency_key FROM jobs WHERE type = 'tick' "
            "GROUP BY 1 HAVING count(*) > 1) AS dup",
        )
        == 0
    )
    assert scalar(db_url, "SELECT count(*) FROM jobs WHERE state = 'leased'") == 0
    assert [p.returncode for p in workers] == [0, 0]
