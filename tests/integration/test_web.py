"""The web dashboard over HTTP (httpx against the ASGI app) on a real database.

Pins down the safety rules (auth 401, CSRF 403, read-only hides and refuses,
escaped payloads, truncated listings) and that actions reach the store with
their actor recorded: every way to retry or cancel a job (page or API, one
job, a selection or a whole filter) in ``job_events``; queue and schedule
controls, which have no job, as the row's ``changed_by`` and in the
``jobrun.web`` log.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from jobrun import Client
from jobrun.domain import JobState, NewJob
from jobrun.web import create_app

LEASE = timedelta(seconds=60)
AUTH = ("ops", "s3cret-pass")


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[Client]:
    async with Client(database_url=db_url) as opened:
        yield opened


def http(app: Any, *, auth: tuple[str, str] | None = AUTH) -> httpx.AsyncClient:
    headers = basic(*auth) if auth else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers
    )


async def csrf(web: httpx.AsyncClient) -> str:
    response = await web.get("/api/csrf")
    assert response.status_code == 200
    token: str = response.json()["token"]
    return token


async def dead_jobs(client: Client, n: int, queue: str = "mail") -> list[Any]:
    store = client.store
    await store.enqueue_batch(
        [NewJob(type="send", queue=queue, payload={"n": i}, max_attempts=1) for i in range(n)]
    )
    jobs = await store.claim([queue], "t", n, LEASE)
    return [await store.fail(job, "t", "boom") for job in jobs]


async def test_requests_without_or_with_wrong_auth_get_401(client: Client) -> None:
    app = create_app(client, auth=AUTH)
    async with http(app, auth=None) as web:
        for path in ("/", "/jobs", "/api/jobs", "/static/htmx.min.js"):
            response = await web.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"].startswith("Basic")
    async with http(app, auth=("ops", "wrong")) as web:
        assert (await web.get("/api/overview")).status_code == 401
    async with http(app) as web:
        assert (await web.get("/api/overview")).status_code == 200


async def test_every_page_renders(client: Client) -> None:
    [job] = await dead_jobs(client, 1)
    async with http(create_app(client, auth=AUTH)) as web:
        for path in ("/", "/jobs", f"/jobs/{job.id}", "/schedules", "/queues"):
            response = await web.get(path)
            assert response.status_code == 200, path
            assert "htmx.min.js" in response.text
        assert "x-frame-options" in response.headers
        assert (await web.get("/static/htmx.min.js")).status_code == 200
        assert (await web.get("/jobs/not-a-uuid")).status_code == 404


async def test_actions_without_the_csrf_token_are_refused(client: Client) -> None:
    [job] = await dead_jobs(client, 1)
    async with http(create_app(client, auth=AUTH)) as web:
        await web.get("/")  # sets the cookie
        assert (await web.post(f"/api/jobs/{job.id}/retry")).status_code == 403
        wrong = await web.post(f"/api/jobs/{job.id}/retry", headers={"X-CSRF-Token": "x" * 43})
        assert wrong.status_code == 403
        form = await web.post(f"/jobs/{job.id}/retry", data={"csrf": "nope"})
        assert form.status_code == 403
        assert (await client.store.get(job.id)).state is JobState.DEAD
        token = await csrf(web)
        ok = await web.post(f"/jobs/{job.id}/retry", data={"csrf": token})
        assert ok.status_code == 303
        assert (await client.store.get(job.id)).state is JobState.QUEUED


async def test_read_only_hides_and_refuses_actions(client: Client) -> None:
    [job] = await dead_jobs(client, 1)
    async with http(create_app(client, auth=AUTH, read_only=True)) as web:
        page = (await web.get(f"/jobs/{job.id}")).text
        assert 'id="retry"' not in page and "read-only" in page.lower()
        assert 'id="bulk-actions"' not in (await web.get("/jobs")).text
        token = await csrf(web)
        api = await web.post(f"/api/jobs/{job.id}/retry", headers={"X-CSRF-Token": token})
        assert api.status_code == 403
        form = await web.post(f"/jobs/{job.id}/retry", data={"csrf": token})
        assert form.status_code == 403
        paused = await web.post("/api/queues/mail/pause", headers={"X-CSRF-Token": token})
        assert paused.status_code == 403
    assert (await client.store.get(job.id)).state is JobState.DEAD


async def test_payloads_are_escaped_and_truncated_in_lists(client: Client) -> None:
    evil = "<script>alert('x')</script>"
    job = await client.store.enqueue(
        NewJob(type="<b>t</b>", payload={"html": evil, "filler": "y" * 500})
    )
    async with http(create_app(client, auth=AUTH)) as web:
        listing = (await web.get("/jobs")).text
        detail = (await web.get(f"/jobs/{job.id}")).text
    for html in (listing, detail):
        assert "<script>alert" not in html
        assert "&lt;script&gt;" in html
        assert "<b>t</b>" not in html
    assert "y" * 500 in detail
    assert "y" * 200 not in listing and "…" in listing


async def test_bulk_retry_of_dead_jobs_records_the_actor(client: Client) -> None:
    dead = await dead_jobs(client, 3)
    async with http(create_app(client, auth=AUTH)) as web:
        token = await csrf(web)
        response = await web.post(
            "/api/jobs/bulk",
            json={"action": "retry", "filter": {"queue": "mail", "state": "dead"}},
            headers={"X-CSRF-Token": token},
        )
        assert response.status_code == 200, response.text
        assert len(response.json()["done"]) == 3
        listing = (await web.get("/api/jobs", params={"state": "dead"})).json()
        assert listing["jobs"] == []
    for job in dead:
        assert (await client.store.get(job.id)).state is JobState.QUEUED
        [*_, retried] = await client.store.events(job.id)
        assert retried.kind == "retried"
        assert retried.detail == "by ops via web"


JOB_ACTION_PATHS = [
    "page-single", "api-single", "page-selection", "page-filter", "api-selection", "api-filter"
]  # fmt: skip


async def act(
    web: httpx.AsyncClient, token: str, how: str, action: str, job_id: Any, state: str
) -> httpx.Response:
    """One job action through one of the dashboard's ways of asking for it."""
    where, scope = how.split("-")
    if where == "page" and scope == "single":
        return await web.post(f"/jobs/{job_id}/{action}", data={"csrf": token})
    if where == "api" and scope == "single":
        return await web.post(f"/api/jobs/{job_id}/{action}", headers={"X-CSRF-Token": token})
    if where == "page":
        form: dict[str, Any] = {"csrf": token, "action": action, "scope": "selected"}
        if scope == "selection":
            form["ids"] = [str(job_id)]
        else:
            form.update(scope="filter", queue="mail", state=state)
        return await web.post("/jobs/bulk", data=form)
    body: dict[str, Any] = {"action": action}
    if scope == "selection":
        body["ids"] = [str(job_id)]
    else:
        body["filter"] = {"queue": "mail", "state": state}
    return await web.post("/api/jobs/bulk", json=body, headers={"X-CSRF-Token": token})


@pytest.mark.parametrize("how", JOB_ACTION_PATHS)
@pytest.mark.parametrize("action", ["retry", "cancel"])
@pytest.mark.parametrize("auth", [AUTH, None], ids=["basic-auth", "no-auth"])
async def test_every_job_action_records_its_actor_in_job_events(
    client: Client, how: str, action: str, auth: tuple[str, str] | None
) -> None:
    if action == "retry":
        [job] = await dead_jobs(client, 1)
        state, kind = "dead", "retried"
    else:
        job = await client.store.enqueue(NewJob(type="send", queue="mail"))
        state, kind = "queued", "cancelled"
    async with http(create_app(client, auth=auth), auth=auth) as web:
        token = await csrf(web)
        response = await act(web, token, how, action, job.id, state)
        assert response.status_code in (200, 303), response.text
    expected = JobState.QUEUED if action == "retry" else JobState.CANCELLED
    assert (await client.store.get(job.id)).state is expected
    [*_, event] = await client.store.events(job.id)
    assert event.kind == kind
    # Without auth there is no user to name: the dashboard says so.
    assert event.detail == f"by {auth[0] if auth else 'anonymous'} via web"


async def test_queue_and_schedule_controls_keep_their_last_actor(client: Client) -> None:
    from jobrun.domain import NewSchedule

    store = client.store
    await store.create_schedule(
        NewSchedule(name="nightly", type="report", every=timedelta(hours=1))
    )
    async with http(create_app(client, auth=None), auth=None) as web:
        h = {"X-CSRF-Token": await csrf(web)}
        assert (await web.post("/api/queues/mail/pause", headers=h)).json()["changed_by"] == (
            "anonymous via web"
        )
        schedule = (await web.post("/api/schedules/nightly/pause", headers=h)).json()
        assert schedule["changed_by"] == "anonymous via web"
    # A change that names nobody (the CLI, code) does not leave the web's name on it.
    assert (await store.resume_queue("mail")).changed_by is None
    assert (await store.set_queue_limits("mail", concurrency=2, actor="deploy")).changed_by == (
        "deploy"
    )
    assert (await store.clear_queue_limits("mail", actor="x" * 300)).changed_by == "x" * 255
    assert (await store.resume_schedule("nightly", actor="ops")).changed_by == "ops"
    [listed] = await store.list_queues()
    assert listed.changed_by == "x" * 255


async def test_queue_and_schedule_actions_log_their_actor(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    from jobrun.domain import NewSchedule

    await client.store.create_schedule(NewSchedule(name="nightly", type="report", cron="0 3 * * *"))
    caplog.set_level(logging.INFO, logger="jobrun.web")
    async with http(create_app(client, auth=AUTH)) as web:
        token = await csrf(web)
        h = {"X-CSRF-Token": token}
        for path, body in (
            ("/api/queues/mail/pause", None),
            ("/api/queues/mail/resume", None),
            ("/api/queues/mail/limits", {"concurrency": 3, "rate": 10, "rate_seconds": 60}),
            ("/api/queues/mail/clear-limits", None),
            ("/api/schedules/nightly/pause", None),
            ("/api/schedules/nightly/resume", None),
        ):
            response = await web.post(path, json=body, headers=h)
            assert response.status_code == 200, (path, response.text)
        for path, form in (
            ("/queues/mail/pause", {}),
            ("/queues/mail/resume", {}),
            ("/queues/mail/limits", {"concurrency": "2"}),
            ("/queues/mail/clear-limits", {}),
            ("/schedules/nightly/pause", {}),
            ("/schedules/nightly/resume", {}),
        ):
            response = await web.post(path, data={"csrf": token, **form})
            assert response.status_code == 303, (path, response.text)
        # A refused action changed nothing and is not logged as done.
        assert (await web.post("/api/schedules/nope/pause", headers=h)).status_code == 404
        # The last change is kept on the rows themselves, and shown.
        await web.post("/queues/mail/pause", data={"csrf": token})
        await web.post("/schedules/nightly/pause", data={"csrf": token})
        [queue] = (await web.get("/api/queues")).json()
        [schedule] = (await web.get("/api/schedules")).json()
        assert queue["paused"] and queue["changed_by"] == "ops via web"
        assert schedule["paused"] and schedule["changed_by"] == "ops via web"
        assert "ops via web" in (await web.get("/queues")).text
        assert "ops via web" in (await web.get("/schedules")).text
    lines = [r.getMessage() for r in caplog.records if r.name == "jobrun.web"][:12]
    expected = [
        "queue 'mail' pause by ops via web",
        "queue 'mail' resume by ops via web",
        "queue 'mail' limits: concurrency 3, rate 10/60s by ops via web",
        "queue 'mail' clear limits by ops via web",
        "schedule 'nightly' pause by ops via web",
        "schedule 'nightly' resume by ops via web",
        "queue 'mail' pause by ops via web",
        "queue 'mail' resume by ops via web",
        "queue 'mail' limits: concurrency 2, rate unchanged by ops via web",
        "queue 'mail' clear limits by ops via web",
        "schedule 'nightly' pause by ops via web",
        "schedule 'nightly' resume by ops via web",
    ]
    assert lines == expected


async def test_bulk_retry_of_a_selection_from_the_page(client: Client) -> None:
    first, second = await dead_jobs(client, 2)
    async with http(create_app(client, auth=AUTH)) as web:
        page = (await web.get("/jobs?state=dead")).text
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        assert token is not None
        response = await web.post(
            "/jobs/bulk",
            data={"csrf": token[1], "action": "retry", "scope": "selected", "ids": [str(first.id)]},
        )
        assert response.status_code == 303
    assert (await client.store.get(first.id)).state is JobState.QUEUED
    assert (await client.store.get(second.id)).state is JobState.DEAD


async def test_cancel_reaches_a_running_job(client: Client) -> None:
    await client.store.enqueue(NewJob(type="slow", queue="work"))
    [running] = await client.store.claim(["work"], "worker-1", 1, LEASE)
    async with http(create_app(client, auth=AUTH)) as web:
        token = await csrf(web)
        response = await web.post(f"/api/jobs/{running.id}/cancel", headers={"X-CSRF-Token": token})
        assert response.status_code == 200
        assert response.json()["cancel_requested"] is True
        detail = (await web.get(f"/api/jobs/{running.id}")).json()
    # The worker's next heartbeat leaves the job out: it stops the handler.
    assert await client.store.heartbeat("worker-1", [running], LEASE) == set()
    [*_, requested] = detail["events"]
    assert requested["kind"] == "cancel_requested"
    assert requested["detail"] == "by ops via web"
    assert requested["owner"] == "worker-1"


async def test_queue_and_schedule_controls(client: Client) -> None:
    from jobrun.domain import NewSchedule

    await client.store.create_schedule(NewSchedule(name="nightly", type="report", cron="0 3 * * *"))
    async with http(create_app(client, auth=AUTH)) as web:
        token = await csrf(web)
        h = {"X-CSRF-Token": token}
        assert (await web.post("/api/queues/mail/pause", headers=h)).json()["paused"] is True
        limits = await web.post(
            "/api/queues/mail/limits", json={"concurrency": 3, "rate": 10}, headers=h
        )
        assert limits.json()["concurrency_limit"] == 3
        assert "paused" in (await web.get("/queues")).text
        await web.post("/queues/mail/resume", data={"csrf": token})
        assert (await web.get("/api/queues")).json()[0]["paused"] is False
        await web.post("/schedules/nightly/pause", data={"csrf": token})
        assert (await web.get("/api/schedules")).json()[0]["paused"] is True
        assert "nightly" in (await web.get("/schedules")).text


async def test_overview_stream_sends_an_event_when_counts_change(client: Client) -> None:
    # httpx's ASGI transport buffers whole bodies, so the stream is read at the ASGI level.
    app = create_app(client, auth=AUTH, poll=0.2)
    chunks: asyncio.Queue[bytes] = asyncio.Queue()
    disconnect = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
        elif message.get("body"):
            await chunks.put(message["body"])

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/sse/overview",
        "raw_path": b"/sse/overview",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"authorization", basic(*AUTH)["Authorization"].encode())],
        "server": ("test", 80),
        "client": ("127.0.0.1", 1),
    }
    served = asyncio.create_task(app(scope, receive, send))
    try:
        assert b"event: overview" in await asyncio.wait_for(chunks.get(), 5)
        await client.store.enqueue(NewJob(type="x", queue="live"))
        assert b"event: overview" in await asyncio.wait_for(chunks.get(), 5)
    finally:
        disconnect.set()
        served.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await served
        await app.state.dashboard.close()
    async with http(app) as web:
        overview = (await web.get("/api/overview")).json()
    assert [q["queue"] for q in overview["queues"]] == ["live"]
    assert overview["queues"][0]["queued"] == 1


async def test_sample_every_warns_that_it_does_nothing_and_the_app_still_serves(
    client: Client,
) -> None:
    with pytest.warns(DeprecationWarning, match="sample_every"):
        app = create_app(client, auth=AUTH, sample_every=5)
    async with http(app) as web:
        assert (await web.get("/api/overview")).status_code == 200
