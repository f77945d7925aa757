"""``jobrun worker`` as a process: wake-up on NOTIFY, shutdown with stubborn handlers and
with jobs claimed ahead.

Both defects these tests pin down were invisible to tests that wired a Worker
by hand: the CLI built its worker without the notifier (so it only polled),
and a sync handler that ignored its token was handed back at the shutdown
deadline while its thread still ran, so another worker started the job again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from jobrun import Client
from jobrun.testing import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.acceptance.worker_defects_app"


@contextmanager
def worker(
    db_url: str, *options: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jobrun", "worker", "--app", APP,
            "--database-url", db_url, "--log-format", "json", *options,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def wait_for_line(proc: subprocess.Popen[str], text: str, timeout: float = 30) -> str:
    """Read the worker's stderr until a line containing ``text``."""
    assert proc.stderr is not None
    stderr = proc.stderr

    def next_line_has_it() -> str | None:
        line = stderr.readline()
        if not line:
            raise AssertionError(f"worker exited before logging {text!r}")
        return line if text in line else None

    return eventually_sync(next_line_has_it, within=timeout, what=f"the worker logging {text!r}")


def enqueue(db_url: str, job_type: str, payload: dict[str, object]) -> str:
    result = subprocess.run(
        [
            sys.executable, "-m", "jobrun", "enqueue", job_type,
            "--payload", json.dumps(payload), "--database-url", db_url,
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def trace_lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines()]


def wait_for_trace(path: Path, count: int, timeout: float) -> list[list[str]]:
    def enough() -> list[list[str]] | None:
        lines = trace_lines(path)
        return lines if len(lines) >= count else None

    return eventually_sync(enough, within=timeout, what=f"{count} lines in {path}")


def offering(db_url: str) -> bool:
    """Whether a worker's handoff offer stands: it has claimed once and waits for work."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM worker_offers WHERE expires_at > now()").fetchone()
    return row is not None and row[0] > 0


def job_row(db_url: str, job_id: str) -> tuple[str, str | None, int]:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT state::text, lease_owner, attempts FROM jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def test_cli_worker_wakes_on_notify_long_before_its_poll_interval(
    db_url: str, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    with worker(db_url, "--poll", "60s") as proc:
        wait_for_line(proc, "started on queues")
        # Let the first (empty) claim pass, so the worker sits in its 60 s wait:
        # that claim writes the worker's handoff offer.
        eventually_sync(lambda: offering(db_url), what="the worker's first claim")
        before = time.time()
        enqueue(db_url, "mark", {"trace": str(trace)})
        (start,) = wait_for_trace(trace, 1, timeout=20)
        # A worker that only polls would start the job about 59 s from now; one
        # woken by NOTIFY starts it as soon as the enqueue commits. The bound is
        # generous for a loaded machine and still far below the poll interval.
        assert float(start[3]) - before < 10
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr


def test_shutdown_leaves_a_stubborn_sync_job_leased_and_exits_at_the_deadline(
    db_url: str, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    job_id = enqueue(db_url, "stubborn", {"trace": str(trace), "sleep": 30})
    with worker(db_url, "--poll", "200ms", "--lease", "6s", "--shutdown-grace", "1s") as first:
        wait_for_trace(trace, 1, timeout=30)
        signalled = time.monotonic()
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=20)
        exited_after = time.monotonic() - signalled
    assert first.returncode == 0, stderr
    assert "Traceback" not in stderr
    # The process exits at its deadline (1 s grace), not when the thread ends (30 s).
    assert exited_after < 10, exited_after
    assert job_id in stderr and "leaving 1 job leased" in stderr, stderr
    # Not handed back: still leased by the first worker, attempt 1, so no other
    # worker can start it while that thread might still run.
    state, owner, attempts = job_row(db_url, job_id)
    assert state == "leased" and owner is not None and attempts == 1

    # A second worker starts it only once the lease has run out and it was reaped.
    with worker(db_url, "--poll", "200ms", "--lease", "6s", "--shutdown-grace", "1s") as second:
        starts = wait_for_trace(trace, 2, timeout=40)
        second.send_signal(signal.SIGKILL)
    assert [line[0] for line in starts] == ["start", "start"]
    assert starts[1][2] == "2"  # the attempt the first worker left was counted
    assert float(starts[1][3]) - float(starts[0][3]) >= 5  # at least the lease


def leased_count(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM jobs WHERE state = 'leased'").fetchone()
    assert row is not None
    return int(row[0])


def test_sigterm_hands_back_the_jobs_a_busy_cli_worker_claimed_ahead(
    db_url: str, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"

    async def fill() -> list[str]:
        async with Client(database_url=db_url) as client:
            payload = {"trace": str(trace), "sleep": 0.02}
            return [str(i) for i in await client.enqueue_many("nap", [payload] * 60)]

    jobs = asyncio.run(fill())
    # One handler at a time; a claim_ahead long enough that the buffer reaches
    # its cap (ten times the concurrency) although the jobs start 50 times a second.
    options = ("--concurrency", "1", "--poll", "200ms")
    with worker(db_url, *options, env={"JOBRUN_CLAIM_AHEAD": "10s"}) as proc:

        def holds_more_than_it_runs() -> bool:
            assert proc.poll() is None
            return leased_count(db_url) >= 6

        eventually_sync(holds_more_than_it_runs, what="the worker holding more than it ran")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    started = {line[1] for line in trace_lines(trace)}
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT id::text, state::text, attempts, coalesce(last_error, '') FROM jobs"
        ).fetchall()
    assert {r[0] for r in rows} == set(jobs)
    assert not [r for r in rows if r[1] == "leased"]
    handed = [r for r in rows if "before the job started" in r[3]]
    assert len(handed) >= 3, rows
    for job_id, state, attempts, _ in handed:
        # Claimed ahead, never run: back in the queue with the attempt not counted.
        assert (state, attempts) == ("queued", 0)
        assert job_id not in started
    for job_id, state, attempts, _ in rows:
        if job_id in started:
            assert (state, attempts) == ("succeeded", 1)
    assert len(trace_lines(trace)) == len(started)  # no job started twice


def test_cli_worker_refreshes_the_statistics_of_a_table_that_grew_under_it(db_url: str) -> None:
    # A session keeps the plan it made of the claim while jobs was nearly empty,
    # a plan that reads the whole table (tests/integration/test_statistics.py).
    # The worker's maintenance leader analyzes a table that outgrew its
    # statistics, so the sessions plan again. Autovacuum (on in the embedded
    # server) is kept off these tables: only the worker may analyze them here.
    from jobrun.postgres import SyncStore, open_sync_pool

    def stats() -> tuple[bool, bool]:
        with psycopg.connect(db_url) as conn:
            row = conn.execute(
                "SELECT last_analyze IS NOT NULL, last_autoanalyze IS NOT NULL "
                "FROM pg_stat_user_tables WHERE relname = 'jobs'"
            ).fetchone()
        assert row is not None
        return row[0], row[1]

    def leading() -> bool:
        with psycopg.connect(db_url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchone()
        return row is not None and row[0] > 0

    with psycopg.connect(db_url, autocommit=True) as conn:
        for table in ("jobs", "job_events"):
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    with worker(db_url, "--log-level", "info") as proc:
        eventually_sync(leading, within=30)
        with open_sync_pool(db_url) as pool:
            SyncStore(pool).enqueue_many("t", [{}] * 5000, queue="elsewhere")
        # The leader looks every 2 seconds.
        eventually_sync(lambda: stats()[0], within=60)
        proc.send_signal(signal.SIGTERM)
        _, logs = proc.communicate(timeout=30)
    assert proc.returncode == 0, logs
    assert stats() == (True, False)
    analyzed = [
        json.loads(line)["message"] for line in logs.splitlines() if "maintenance: analyzed" in line
    ]
    tables = {
        name.strip(",")
        for message in analyzed
        for name in message.split(" (")[0].removeprefix("maintenance: analyzed ").split()
    }
    assert "jobs" in tables, logs


def _interpreter_default_young_threshold() -> int:
    out = subprocess.run(
        [sys.executable, "-c", "import gc; print(gc.get_threshold()[0])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(out.stdout)


def test_cli_worker_runs_handlers_with_the_collector_threshold_raised_unless_told_off(
    db_url: str,
) -> None:
    # The default raise, and JOBRUN_GC_YOUNG_THRESHOLD=off keeping the
    # interpreter's own, as a handler of `jobrun worker` sees them.
    for setting, expected in (("", 10_000), ("off", _interpreter_default_young_threshold())):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("JOBRUN_GC_YOUNG_THRESHOLD", None)
        if setting:
            env["JOBRUN_GC_YOUNG_THRESHOLD"] = setting
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "jobrun", "worker", "--app",
                "tests.acceptance.cli_worker_app", "--database-url", db_url,
                "--log-format", "json",
            ],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            wait_for_line(proc, "started on queues")
            enqueue(db_url, "cli.gc_threshold", {})
            line = wait_for_line(proc, "gc thresholds")
            seen = int(json.loads(line)["message"].split()[-1].split(",")[0])
            assert seen == expected, (setting, line)
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=30)
            assert proc.returncode == 0, stderr
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
