"""examples/fastapi as users run it: uvicorn serving the app, `jobrun worker` beside it.

Both run as subprocesses on a fresh database. Over HTTP: a signup is
committed and its welcome job runs once (one outbox row); a duplicate signup
is rolled back and leaves no job; the dashboard mounted at /admin/jobs is
refused without the app's own token and served with it, its links under the
prefix. uvicorn also runs a worker in the app (SIGNUP_WORKER=1), so its
stderr shows jobrun's log records next to uvicorn's.
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

from jobrun.testing import eventually_sync

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi"
TOKEN = "example-admin-token"


def start(argv: list[str], db_url: str, log: Path, **env: str) -> subprocess.Popen[bytes]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")},
        "JOBRUN_DATABASE_URL": db_url,
        "PYTHONPATH": f"{EXAMPLE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", *argv], cwd=EXAMPLE, env=environment,
        stdout=subprocess.DEVNULL, stderr=log.open("wb"),
    )  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def service(db_url: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    server_log = tmp_path / "uvicorn.log"
    server = start(
        ["uvicorn", "fastapi_signup.app:app", "--host", "127.0.0.1", "--port", str(port)],
        db_url, server_log, SIGNUP_ADMIN_TOKEN=TOKEN, SIGNUP_WORKER="1",
    )  # fmt: skip
    worker = start(
        ["jobrun", "worker", "--app", "fastapi_signup.jobs", "--log-level", "info"],
        db_url, tmp_path / "worker.log",
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        assert server.poll() is None, server_log.read_text()
        try:
            return httpx.get(url + "/openapi.json", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        eventually_sync(serving, within=60, what="uvicorn serving the example")
        yield url, server_log
    finally:
        stop(server)
        stop(worker)


def rows(db_url: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(query.encode()).fetchall()


def test_a_committed_signup_runs_its_welcome_once_and_a_rolled_back_one_leaves_no_job(
    db_url: str, service: tuple[str, Path]
) -> None:
    url, server_log = service
    made = httpx.post(url + "/signup", json={"email": "ada@example.com", "name": "Ada"})
    assert made.status_code == 201, made.text
    job_id = made.json()["job"]
    # Committed before the response was sent (the Transaction dependency's scope).
    assert rows(db_url, f"SELECT count(*) FROM jobs WHERE id = '{job_id}'") == [(1,)]
    eventually_sync(
        lambda: (
            rows(db_url, f"SELECT state::text FROM jobs WHERE id = '{job_id}'") == [("succeeded",)]
        ),
        within=60,
        what="the welcome job succeeded",
    )
    again = httpx.post(url + "/signup", json={"email": "ada@example.com", "name": "Ada"})
    assert again.status_code == 409, again.text
    # The duplicate's job was enqueued before its insert failed: the rollback took it.
    assert rows(db_url, "SELECT count(*) FROM jobs WHERE type = 'welcome'") == [(1,)]
    assert rows(db_url, "SELECT count(*) FROM users") == [(1,)]
    assert rows(db_url, "SELECT email, body FROM outbox") == [
        ("ada@example.com", "Hello Ada, welcome aboard.")
    ]
    # jobrun's records reach uvicorn's stderr (the lifespan's handler).
    assert "jobrun.worker: worker" in server_log.read_text(), server_log.read_text()[-2000:]


def test_the_mounted_dashboard_answers_only_behind_the_apps_own_token(
    service: tuple[str, Path],
) -> None:
    url, _ = service
    refused = httpx.get(url + "/admin/jobs/")
    assert refused.status_code == 401, refused.text
    assert refused.headers["www-authenticate"] == "Bearer"
    wrong = httpx.get(url + "/admin/jobs/", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    page = httpx.get(url + "/admin/jobs/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert page.status_code == 200, page.text
    assert 'href="/admin/jobs/jobs' in page.text, page.text[:2000]
    listing = httpx.get(url + "/admin/jobs/jobs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert listing.status_code == 200, listing.text
