"""Deleting jobs: the store's delete, and the dashboard's, which asks for the count first
(the API and the pages over a real socket)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun.domain import NewJob, Outcome, Unique
from jobrun.errors import InvalidJob, JobNotFound
from jobrun.postgres import Pool, Store


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


async def rows(store: Store, table: str) -> int:
    async with store.pool.connection() as conn:
        found = await (await conn.execute(f"SELECT count(*) FROM {table}")).fetchone()
    assert found is not None
    return int(found[0])


async def test_delete_takes_jobs_with_their_events_and_results_but_never_a_running_one(
    store: Store,
) -> None:
    done = await store.enqueue(NewJob(type="t", unique=Unique(by=[])))
    running = await store.enqueue(NewJob(type="other"))
    queued = await store.enqueue(NewJob(type="t2", idempotency_key="k"))
    (held,) = await store.claim(["default"], "w", 1, timedelta(minutes=1))
    assert held.id == done.id
    await store.record_outcomes("w", [Outcome(job=held, result='{"ok":true}')])
    (busy,) = await store.claim(["default"], "w", 1, timedelta(minutes=1))
    assert busy.id == running.id
    missing = "0190b3c4-0000-7000-8000-000000000000"
    deleted = await store.delete_jobs([done.id, running.id, queued.id, missing])  # type: ignore[list-item]
    assert sorted(deleted) == sorted([done.id, queued.id])
    assert await store.get(running.id)
    with pytest.raises(JobNotFound):
        await store.get(done.id)
    assert await rows(store, "job_results") == 0
    events = {e.job_id for e in await store.events(running.id)}
    assert events == {running.id}
    assert await rows(store, "job_events") == len(await store.events(running.id))
    # The keys the deleted jobs held are free again.
    assert (await store.enqueue(NewJob(type="t", unique=Unique(by=[])))).id != done.id
    assert (await store.enqueue(NewJob(type="t2", idempotency_key="k"))).id != queued.id
    with pytest.raises(InvalidJob, match="not-an-id"):
        await store.delete_jobs(["not-an-id"])  # type: ignore[list-item]


async def test_the_dashboard_deletes_only_the_count_it_was_told(store: Store, db_url: str) -> None:
    jobs = [await store.enqueue(NewJob(type="t", queue="mail")) for _ in range(3)]
    keep = await store.enqueue(NewJob(type="t", queue="other"))
    proc, site = serve(db_url)
    try:
        async with httpx.AsyncClient(base_url=site, auth=(USER, PASSWORD), timeout=30) as web:
            token = (await web.get("/api/csrf")).json()["token"]
            headers = {"X-CSRF-Token": token}
            by_filter = {"action": "delete", "filter": {"queue": "mail"}}
            asked = await web.post("/api/jobs/bulk", json=by_filter, headers=headers)
            assert asked.status_code == 409
            assert asked.json()["confirm"] == 3
            assert "this deletes 3 jobs" in asked.json()["error"]
            wrong = await web.post(
                "/api/jobs/bulk", json={**by_filter, "confirm": 2}, headers=headers
            )
            assert wrong.status_code == 409
            assert (await store.get(jobs[0].id)).id == jobs[0].id  # nothing deleted yet
            # The page asks first, then deletes what it was told.
            form = {"csrf": token, "action": "delete", "scope": "selected", "ids": str(jobs[0].id)}
            page = await web.post("/jobs/bulk", data=form)
            assert page.status_code == 200 and 'id="confirm-delete"' in page.text
            assert "Delete 1 job?" in page.text and f'value="{jobs[0].id}"' in page.text
            gone = await web.post(
                "/jobs/bulk", data={**form, "confirm": "1"}, follow_redirects=False
            )
            assert gone.status_code == 303
            answer = await web.post(
                "/api/jobs/bulk", json={**by_filter, "confirm": 2}, headers=headers
            )
            assert answer.status_code == 200, answer.text
            assert sorted(answer.json()["done"]) == sorted(str(j.id) for j in jobs[1:])
    finally:
        await asyncio.to_thread(stop, proc)
    assert [j.id for j in (await store.list_jobs(limit=10)).jobs] == [keep.id]


async def test_a_queue_is_cleared_of_its_queued_jobs_from_the_queues_page(
    store: Store, db_url: str
) -> None:
    queued = [await store.enqueue(NewJob(type="t", queue="billing/eu")) for _ in range(2)]
    other = await store.enqueue(NewJob(type="t", queue="billing"))
    await store.pause_queue("billing/eu")  # a row on the queues page
    proc, site = serve(db_url)
    try:
        async with httpx.AsyncClient(base_url=site, auth=(USER, PASSWORD), timeout=30) as web:
            page = await web.get("/queues")
            assert "Clear queued…" in page.text
            token = (await web.get("/api/csrf")).json()["token"]
            form = {
                "csrf": token,
                "action": "delete",
                "scope": "filter",
                "queue": "billing/eu",
                "state": "queued",
            }
            asked = await web.post("/jobs/bulk", data=form)
            assert "Delete 2 jobs?" in asked.text
            done = await web.post("/jobs/bulk", data={**form, "confirm": "2"})
            assert done.status_code == 303  # back to the listing of that filter
            assert done.headers["location"].endswith("/jobs?queue=billing%2Feu&state=queued")
    finally:
        await asyncio.to_thread(stop, proc)
    left = [j.id for j in (await store.list_jobs(limit=10)).jobs]
    assert left == [other.id] and all(j.id not in left for j in queued)
