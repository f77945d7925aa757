"""The signup service's tests, on jobrun's test kit and a fresh database per test.

The handler runs through ``run_job`` (as a worker would, its commit callback
captured and then run on a connection of the test's); the app runs through
FastAPI's TestClient, which drives its lifespan, on the kit's database.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient

from fastapi_signup.app import SCHEMA, app
from fastapi_signup.jobs import registry
from jobrun.testing import run_job


@pytest.fixture
def service(jobrun_database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("JOBRUN_DATABASE_URL", jobrun_database_url)
    monkeypatch.setenv("SIGNUP_ADMIN_TOKEN", "test-token")
    with TestClient(app) as client:
        yield client


async def test_the_welcome_writes_one_outbox_row_when_its_completion_commits(
    jobrun_database_url: str,
) -> None:
    result = await run_job(registry, "welcome", {"email": "grace@example.com", "name": "Grace"})
    assert result.completed, result
    async with await psycopg.AsyncConnection.connect(jobrun_database_url) as conn:
        await conn.execute(SCHEMA)
        await result.commit_with(conn)
        cursor = await conn.execute("SELECT email, body FROM outbox")
        assert await cursor.fetchall() == [("grace@example.com", "Hello Grace, welcome aboard.")]


def test_a_signup_enqueues_its_welcome_and_a_duplicate_enqueues_nothing(
    service: TestClient, jobrun_database_url: str
) -> None:
    made = service.post("/signup", json={"email": "alan@example.com", "name": "Alan"})
    assert made.status_code == 201, made.text
    again = service.post("/signup", json={"email": "alan@example.com", "name": "Alan"})
    assert again.status_code == 409, again.text
    with psycopg.connect(jobrun_database_url) as conn:
        jobs = conn.execute("SELECT id::text, payload FROM jobs WHERE type = 'welcome'").fetchall()
    assert jobs == [(made.json()["job"], {"email": "alan@example.com", "name": "Alan"})]


def test_the_dashboard_wants_the_admin_token(service: TestClient) -> None:
    assert service.get("/admin/jobs/").status_code == 401
    page = service.get("/admin/jobs/", headers={"Authorization": "Bearer test-token"})
    assert page.status_code == 200
