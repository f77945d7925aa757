"""examples/django as users run it: `manage.py runserver` and `manage.py jobrun_worker`.

Both run as subprocesses on a fresh database, after `manage.py migrate` and
`manage.py jobrun_migrate`. Over HTTP: a signup is committed and its welcome
job runs once (one outbox row); a duplicate signup is rolled back in
`transaction.atomic()` and leaves no job. The example's own tests then run
under Django's test runner (`manage.py test`), on a test database Django
creates, with jobrun's test helpers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from tests.acceptance.web_site import free_port

from jobrun import NewJob, SyncClient
from jobrun.testing import eventually_sync

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django"


def environment(db_url: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("JOBRUN_", "DJANGO_"))},
        "DATABASE_URL": db_url,
        "PYTHONUNBUFFERED": "1",
    }


def manage(db_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=EXAMPLE, env=environment(db_url),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def start(db_url: str, log: Path, *argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", *argv], cwd=EXAMPLE, env=environment(db_url),
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def site(db_url: str, tmp_path: Path) -> Iterator[str]:
    for command in (["migrate"], ["jobrun_migrate"]):
        done = manage(db_url, *command)
        assert done.returncode == 0, done.stdout + done.stderr
    status = manage(db_url, "jobrun_migrate", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "00001_jobs.sql" in status.stdout and "pending" not in status.stdout, status.stdout
    port = free_port()
    server_log, worker_log = tmp_path / "runserver.log", tmp_path / "worker.log"
    server = start(db_url, server_log, "runserver", "--noreload", f"127.0.0.1:{port}")
    worker = start(db_url, worker_log, "jobrun_worker", "--log-level", "info")
    url = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        assert server.poll() is None, server_log.read_text()
        assert worker.poll() is None, worker_log.read_text()
        try:
            httpx.get(url + "/signup", timeout=2)
        except httpx.TransportError:
            return False
        return "started on queues" in worker_log.read_text()

    try:
        eventually_sync(serving, within=60, what="runserver serving and the worker started")
        yield url
    finally:
        stop(server)
        stop(worker)


def rows(db_url: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(query.encode()).fetchall()


def test_a_committed_signup_runs_its_welcome_once_and_a_rolled_back_one_leaves_no_job(
    db_url: str, site: str
) -> None:
    made = httpx.post(site + "/signup", json={"email": "ada@example.com", "name": "Ada"})
    assert made.status_code == 201, made.text
    job_id = made.json()["job"]
    eventually_sync(
        lambda: (
            rows(db_url, f"SELECT state::text FROM jobs WHERE id = '{job_id}'") == [("succeeded",)]
        ),
        within=60,
        what="the welcome job succeeded",
    )
    again = httpx.post(site + "/signup", json={"email": "ada@example.com", "name": "Ada"})
    assert again.status_code == 409, again.text
    assert rows(db_url, "SELECT count(*) FROM jobs WHERE type = 'welcome'") == [(1,)]
    assert rows(db_url, "SELECT count(*) FROM accounts_member") == [(1,)]
    assert rows(db_url, "SELECT email, body FROM accounts_outbox") == [
        ("ada@example.com", "Hello Ada, welcome aboard.")
    ]


def test_the_example_s_tests_pass_under_django_s_test_runner_and_pytest_django(
    db_url: str,
) -> None:
    done = manage(db_url, "test", "accounts", "--noinput")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ran 1 test" in done.stderr, done.stderr
    with_pytest = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=EXAMPLE, env=environment(db_url), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert with_pytest.returncode == 0, with_pytest.stdout + with_pytest.stderr
    assert "1 passed" in with_pytest.stdout, with_pytest.stdout
    assert "warning" not in with_pytest.stdout.lower(), with_pytest.stdout


def test_jobrun_worker_takes_jobrun_worker_s_options_processes_included(
    db_url: str, tmp_path: Path
) -> None:
    done = manage(db_url, "migrate")
    assert done.returncode == 0, done.stderr
    log = tmp_path / "worker.log"
    worker = start(db_url, log, "jobrun_worker", "--processes", "2", "--concurrency", "3")
    try:
        with SyncClient(database_url=db_url) as client:
            job = client.enqueue(
                NewJob(type="welcome", payload={"email": "bo@example.com", "name": "Bo"})
            )
        eventually_sync(
            lambda: (
                rows(db_url, f"SELECT state::text FROM jobs WHERE id = '{job.id}'")
                == [("succeeded",)]
            ),
            within=60,
            what="a child of the supervisor ran the job",
        )
        # The job can finish before the second child has logged its start.
        eventually_sync(
            lambda: log.read_text().count("started on queues default, concurrency 3") == 2,
            within=60,
            what="both children of the supervisor started with concurrency 3",
        )
    finally:
        stop(worker)
    assert rows(db_url, "SELECT email FROM accounts_outbox") == [("bo@example.com",)]
    bad = manage(db_url, "jobrun_worker", "--concurrency", "many")
    assert bad.returncode == 2 and bad.stderr.startswith("error:"), bad.stderr
