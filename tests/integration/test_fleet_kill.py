"""A fleet of eight worker processes on one database, half of it killed mid-run.

Four `jobrun worker` processes started one by one and a `jobrun worker
--processes 4` supervisor share a queue limited to 6 leased jobs, the
scheduler and maintenance (each elected among the eight). While they work
3,000 jobs whose commit callback bumps a per-job counter, the test SIGKILLs
two of the separate processes and two of the supervisor's children (the
supervisor starts new ones). Afterwards every job succeeded once, every
effect committed once, the queue's limit held in every sample taken while
they ran, and the scheduler fired after the kills without a double.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from jobrun.domain import NewJob, NewSchedule
from jobrun.postgres import Pool
from jobrun.postgres.store import Store
from jobrun.testing import eventually

from .own_servers import children_of

HERE = Path(__file__).parent
JOBS = 3_000
LIMIT = 6


def start(db_url: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.Popen(
        [
            sys.executable, "-m", "jobrun", "worker", "--database-url", db_url,
            "--app", "fault_app", "--queue", "limited", "--scheduler", "--concurrency", "10",
            "--poll", "200ms", "--lease", "5s", "--shutdown-grace", "5s",
            "--log-level", "info", *extra,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),  # a file: a full pipe nobody reads would block the worker
        start_new_session=True,
    )  # fmt: skip


def scalar(db_url: str, query: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(query.encode()).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


@pytest.mark.slow
async def test_half_of_a_fleet_of_eight_killed_loses_no_job_and_doubles_no_effect(
    pool: Pool, db_url: str, tmp_path: Path
) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(b"CREATE TABLE fault_counts (job_id uuid PRIMARY KEY, n int NOT NULL)")
    store = Store(pool)
    await store.set_queue_limits("limited", concurrency=LIMIT)
    await store.enqueue_batch(
        [NewJob(type="count", queue="limited", payload={"i": i}) for i in range(JOBS)]
    )
    await store.create_schedule(
        NewSchedule(name="tick", type="tick", queue="limited", every=timedelta(seconds=1))
    )
    await pool.close()

    logs = [tmp_path / f"worker-{n}.log" for n in range(4)]
    separate = [start(db_url, log) for log in logs]
    supervisor_log = tmp_path / "supervisor.log"
    supervisor = start(db_url, supervisor_log, "--processes", "4")
    everyone = [*separate, supervisor]
    leased_samples: list[int] = []

    def done() -> int:
        leased_samples.append(
            scalar(db_url, "SELECT count(*) FROM jobs WHERE queue = 'limited' AND state = 'leased'")
        )
        return scalar(
            db_url, "SELECT count(*) FROM jobs WHERE type = 'count' AND state = 'succeeded'"
        )

    try:
        await eventually(
            lambda: (
                all("started on queues" in log.read_text() for log in logs)
                and len(children_of(supervisor.pid)) == 4
            ),
            what="eight workers running",
        )
        await eventually(lambda: done() >= 300, within=120, what="300 jobs done")
        victims = [separate[0].pid, separate[1].pid, *children_of(supervisor.pid)[:2]]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        killed_at = scalar(db_url, "SELECT extract(epoch FROM now())::bigint")
        await eventually(
            lambda: (
                done() == JOBS
                and scalar(
                    db_url,
                    "SELECT count(*) FROM jobs WHERE type = 'tick' "
                    f"AND created_at > to_timestamp({killed_at})",
                )
                >= 2
            ),
            within=180,
            what="every job done and the schedule firing after the kills",
        )
        assert separate[0].wait(timeout=30) == -signal.SIGKILL
        assert separate[1].wait(timeout=30) == -signal.SIGKILL
        assert len(children_of(supervisor.pid)) == 4, "the supervisor replaced its children"
    finally:
        for proc in everyone:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=60) for proc in everyone]
    assert codes[2:] == [0, 0, 0], [log.read_text()[-2000:] for log in logs[2:]]
    assert 0 < max(leased_samples) <= LIMIT, max(leased_samples)
    assert scalar(db_url, "SELECT count(*) FROM jobs WHERE type = 'count'") == JOBS
    assert scalar(db_url, "SELECT count(*) FROM fault_counts") == JOBS
    assert scalar(db_url, "SELECT count(*) FROM fault_counts WHERE n <> 1") == 0
    assert scalar(db_url, "SELECT count(*) FROM jobs WHERE state = 'leased'") == 0
    assert (
        scalar(
            db_url,
            "SELECT count(*) FROM (SELECT idempotency_key FROM jobs WHERE type = 'tick' "
            "GROUP BY 1 HAVING count(*) > 1) AS dup",
        )
        == 0
    )
