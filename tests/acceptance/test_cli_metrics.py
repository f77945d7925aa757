"""``jobrun worker --metrics-port``: metrics, health and readiness scraped over HTTP.

The worker runs as users run it, a subprocess; the test enqueues through the
CLI, scrapes ``/metrics`` with a plain HTTP client and parses the exposition
with prometheus_client's own parser.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from jobrun.testing import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.acceptance.metrics_app"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def worker(db_url: str, port: int, *options: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jobrun", "worker", "--app", APP, "--database-url", db_url,
            "--metrics-port", str(port), "--poll", "100ms", "--log-format", "json",
            "--queue-stats-every", "200ms", *options,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_until_serving(proc: subprocess.Popen[str], port: int, timeout: float = 30) -> None:
    def serving() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"worker exited: {proc.communicate()[1]}")
        try:
            get(port, "/healthz")
        except OSError:
            return False
        return True

    eventually_sync(serving, within=timeout, what="the metrics server up")


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, frozenset(s.labels.items()))] = s.value
    return found


def value(
    found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


def enqueue(db_url: str, job_type: str, *options: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "jobrun", "enqueue", job_type, "--database-url", db_url, *options],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_worker_serves_metrics_health_and_readiness(db_url: str) -> None:
    port = free_port()
    with worker(db_url, port) as proc:
        wait_until_serving(proc, port)
        ok_ids = [enqueue(db_url, "obs.ok") for _ in range(3)]
        enqueue(db_url, "obs.flaky", "--max-attempts", "3")
        enqueue(db_url, "obs.broken", "--max-attempts", "1")
        # A delayed job is queued but not due, and is no lag.
        enqueue(db_url, "obs.ok", "--queue", "later", "--delay", "1h")

        found: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}

        def all_counted() -> bool:
            nonlocal found
            status, text = get(port, "/metrics")
            assert status == 200
            found = samples(text)
            return (
                value(found, "jobrun_jobs_succeeded_total", queue="default", type="obs.ok") == 3
                and value(found, "jobrun_jobs_succeeded_total", queue="default", type="obs.flaky")
                == 1
                and value(found, "jobrun_jobs_dead_total", queue="default", type="obs.broken") == 1
                and value(found, "jobrun_queue_queued_jobs", queue="later") == 1
                and value(found, "jobrun_queue_queued_jobs", queue="default") == 0
            )

        eventually_sync(all_counted, within=60, what="every outcome in /metrics")

        assert value(found, "jobrun_jobs_claimed_total", queue="default", type="obs.ok") == 3
        assert value(found, "jobrun_jobs_claimed_total", queue="default", type="obs.flaky") == 2
        assert value(found, "jobrun_jobs_failed_total", queue="default", type="obs.flaky") == 1
        assert value(found, "jobrun_jobs_failed_total", queue="default", type="obs.broken") == 0
        assert value(found, "jobrun_jobs_dead_total", queue="default", type="obs.flaky") == 0
        # The worker enqueued nothing itself: the CLI did, in other processes.
        assert value(found, "jobrun_jobs_enqueued_total", queue="default", type="obs.ok") == 0
        for histogram in ("jobrun_job_queue_wait_seconds", "jobrun_job_run_seconds"):
            assert value(found, f"{histogram}_count", queue="default", type="obs.ok") == 3
            assert (
                value(found, f"{histogram}_bucket", queue="default", type="obs.ok", le="+Inf") == 3
            )
        assert value(found, "jobrun_job_run_seconds_count", queue="default", type="obs.flaky") == 2
        assert value(found, "jobrun_queue_stats_leader") == 1
        assert value(found, "jobrun_queue_due_jobs", queue="later") == 0
        assert value(found, "jobrun_queue_lag_seconds", queue="later") == 0

        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (200, "ready\n")
        assert get(port, "/nope")[0] == 404

        # Migrations no longer current (a version row gone): not ready, with the reason.
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("DELETE FROM goose_db_version WHERE version_id = 5")  # test fixture SQL
        status, body = get(port, "/readyz")
        assert status == 503 and body.startswith("not ready:"), body
        assert get(port, "/healthz")[0] == 200

        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    # The handler's own log records name the job, through the CLI's log filter.
    records = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    handler_logs = [r for r in records if r["logger"] == "metrics_app"]
    assert {r["job_id"] for r in handler_logs} == set(ok_ids)
    assert all(r["job_type"] == "obs.ok" and r["queue"] == "default" for r in handler_logs)
    assert all(r["attempt"] == 1 for r in handler_logs)


def test_readyz_is_503_when_the_database_goes_away(db_url: str, pg_admin_url: str) -> None:
    port = free_port()
    with worker(db_url, port) as proc:
        wait_until_serving(proc, port)
        assert get(port, "/readyz")[0] == 200
        name = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            # Test fixture SQL: cut every session of the worker and refuse new ones.
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
        try:
            status, body = get(port, "/readyz")
            assert status == 503, body
            assert get(port, "/healthz") == (200, "ok\n")
        finally:
            with psycopg.connect(pg_admin_url, autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


def test_metrics_port_without_the_extra_is_one_error_line(db_url: str) -> None:
    # prometheus_client made unimportable, as in an install without jobrun[metrics].
    code = (
        "import sys; sys.modules['prometheus_client'] = None; "
        "from jobrun.cli import main; sys.argv[0] = 'jobrun'; main()"
    )
    result = subprocess.run(
        [
            sys.executable, "-c", code, "worker", "--app", APP, "--database-url", db_url,
            "--metrics-port", str(free_port()),
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "pip install 'jobrun[metrics]'" in lines[0]


def test_bad_metrics_port_is_one_error_line(db_url: str) -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "jobrun", "worker", "--app", APP, "--database-url", db_url,
            "--metrics-port", "70000",
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "--metrics-port" in lines[0]


def test_stats_lag_counts_due_jobs_only(db_url: str) -> None:
    enqueue(db_url, "t", "--queue", "now")
    enqueue(db_url, "t", "--queue", "later", "--delay", "1h")
    result = subprocess.run(
        [sys.executable, "-m", "jobrun", "stats", "--database-url", db_url],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = {
        cells[0]: cells
        for line in result.stdout.splitlines()
        if "│" in line
        for cells in [[c.strip() for c in line.split("│")[1:-1]]]
    }
    # queued, due, leased, succeeded, dead, cancelled, lag
    assert rows["later"][1:] == ["1", "0", "0", "0", "0", "0", "-"]
    assert rows["now"][1:4] == ["1", "1", "0"]
    assert rows["now"][7].endswith(("ms", "s"))
