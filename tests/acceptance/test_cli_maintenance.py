"""``jobrun worker --maintenance/--no-maintenance`` as a process: retention on and off.

A worker with maintenance on competes for the maintenance lock as it starts
and logs ``maintenance: leading`` once it holds it, before any shutdown can
complete (a stop request is only seen after the attempt to lead returns), so
the absence of that line after a clean exit means the service never ran.
"""

from __future__ import annotations

import signal
from pathlib import Path

import psycopg
from tests.acceptance.test_cli_worker import enqueue, wait_for_line, wait_for_trace, worker


def old_succeeded_job(db_url: str) -> str:
    """A job that succeeded two days ago: past the default retention of one day."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO jobs (id, type, state, attempts, finished_at)"
            " VALUES (gen_random_uuid(), 'mark', 'succeeded', 1, now() - interval '2 days')"
            " RETURNING id::text"
        ).fetchone()
    assert row is not None
    return str(row[0])


def exists(db_url: str, job_id: str) -> bool:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT 1 FROM jobs WHERE id = %s", (job_id,)).fetchone() is not None


def test_the_worker_prunes_old_jobs_with_maintenance_on(db_url: str) -> None:
    old = old_succeeded_job(db_url)
    with worker(db_url, "--maintenance", "--poll", "200ms") as proc:
        line = wait_for_line(proc, "maintenance: deleted")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "1 succeeded" in line, line
    assert not exists(db_url, old)


def test_the_worker_leaves_old_jobs_alone_with_maintenance_off(db_url: str, tmp_path: Path) -> None:
    old = old_succeeded_job(db_url)
    trace = tmp_path / "trace"
    with worker(db_url, "--no-maintenance", "--poll", "200ms") as proc:
        wait_for_line(proc, "started on queues")
        enqueue(db_url, "mark", {"trace": str(trace)})
        wait_for_trace(trace, 1, timeout=30)  # the worker is up and running jobs
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "maintenance:" not in stderr, stderr
    assert exists(db_url, old)
