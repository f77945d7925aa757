"""Run now: a queued job not due yet made due at once, through the store, the API
(a real socket) and the CLI (a subprocess)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
from tests.acceptance.test_cli import jobrun
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun.domain import JobState, NewJob
from jobrun.errors import InvalidTransition, JobNotFound
from jobrun.postgres import Pool, Store


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


async def test_a_delayed_job_becomes_due_and_a_due_one_is_left_alone(store: Store) -> None:
    later = await store.enqueue(NewJob(type="t", delay=timedelta(hours=1)))
    assert await store.claim(["default"], "w", 10, timedelta(minutes=1)) == []
    moved = await store.run_now(later.id, actor="ops via web")
    assert moved.state is JobState.QUEUED and moved.run_at <= await store.now()
    (claimed,) = await store.claim(["default"], "w", 10, timedelta(minutes=1))
    assert claimed.id == later.id
    events = [(e.kind, e.detail) for e in await store.events(later.id)]
    assert ("run_now", "by ops via web") in events
    due = await store.enqueue(NewJob(type="t"))
    unchanged = await store.run_now(due.id)
    assert unchanged.run_at == due.run_at
    assert "run_now" not in [e.kind for e in await store.events(due.id)]


async def test_a_job_waiting_for_its_retry_runs_now(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t", max_attempts=3))
    (held,) = await store.claim(["default"], "w", 1, timedelta(minutes=1))
    failed = await store.fail(held, "w", "boom")
    assert failed.state is JobState.QUEUED and failed.run_at > await store.now()
    await store.run_now(job.id)
    (again,) = await store.claim(["default"], "w", 1, timedelta(minutes=1))
    assert (again.id, again.attempts) == (job.id, 2)


async def test_a_job_not_queued_is_refused_and_an_unknown_one_is_not_found(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t"))
    await store.claim(["default"], "w", 1, timedelta(minutes=1))
    with pytest.raises(InvalidTransition, match="leased"):
        await store.run_now(job.id)
    with pytest.raises(JobNotFound):
        await store.run_now("0190b3c4-0000-7000-8000-000000000000")  # type: ignore[arg-type]


async def test_run_now_from_the_api_and_the_cli(store: Store, db_url: str) -> None:
    first = await store.enqueue(NewJob(type="t", delay=timedelta(days=1)))
    second = await store.enqueue(NewJob(type="t", delay=timedelta(days=1)))
    proc, site = serve(db_url)
    try:
        async with httpx.AsyncClient(base_url=site, auth=(USER, PASSWORD), timeout=30) as web:
            token = (await web.get("/api/csrf")).json()["token"]
            answer = await web.post(
                f"/api/jobs/{first.id}/run-now", json={}, headers={"X-CSRF-Token": token}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["id"] == str(first.id)
            page = await web.get(f"/jobs/{second.id}")
            assert 'id="run-now"' in page.text
    finally:
        await asyncio.to_thread(stop, proc)
    printed = await asyncio.to_thread(
        jobrun, "jobs", "run-now", str(second.id), "--database-url", db_url
    )
    assert (printed.returncode, printed.stdout) == (0, f"job {second.id} is due now\n")
    now = await store.now()
    assert all([(await store.get(j.id)).run_at <= now for j in (first, second)])
    refused = await asyncio.to_thread(
        jobrun, "jobs", "run-now", "not-a-job", "--database-url", db_url
    )
    assert refused.returncode == 2 and "not-a-job" in refused.stderr
