"""jobrun.integrations.starlette: a real Starlette app's lifespan, routes and in-process worker.

The app runs through Starlette's TestClient, which drives the ASGI lifespan
(startup and shutdown) as a server does. A signup route writes a row and
enqueues its job in one transaction on the client's pool; the worker the
lifespan started runs the job once; shutdown stops the worker and closes the
client.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from jobrun import JobContext, NewJob, Registry
from jobrun.integrations.starlette import Jobrun, jobrun_client
from jobrun.testing import eventually_sync


def _welcomed(db_url: str) -> list[tuple[int, bool]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT id, welcomed FROM users ORDER BY id").fetchall()


def test_the_lifespan_serves_the_client_and_runs_the_worker_until_shutdown(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int PRIMARY KEY, welcomed bool NOT NULL)")
    registry = Registry()
    runs: list[int] = []

    @registry.handler("welcome")
    async def welcome(ctx: JobContext, payload: Any) -> Any:
        runs.append(payload["user_id"])

        async def commit(conn: Any) -> None:
            await conn.execute(
                "UPDATE users SET welcomed = true WHERE id = %s", (payload["user_id"],)
            )

        return commit

    async def signup(request: Request) -> JSONResponse:
        client = jobrun_client(request)
        user_id = int(request.path_params["user_id"])
        async with client.pool.connection() as conn, conn.transaction():
            await conn.execute("INSERT INTO users VALUES (%s, false)", (user_id,))
            job = await client.enqueue(
                NewJob(type="welcome", payload={"user_id": user_id}), conn=conn
            )
        return JSONResponse({"job": str(job.id)})

    jobs = Jobrun(registry, database_url=db_url, worker=True, poll="1s")
    app = Starlette(
        routes=[Route("/signup/{user_id}", signup, methods=["POST"])], lifespan=jobs.lifespan
    )
    with TestClient(app) as http:
        assert jobs.client is not None
        answer = http.post("/signup/7")
        assert answer.status_code == 200, answer.text
        eventually_sync(lambda: _welcomed(db_url) == [(7, True)], what="the job ran")
    assert jobs.client is None  # shutdown closed it, after stopping the worker
    assert runs == [7]
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT state::text FROM jobs").fetchall()
    assert row == [("succeeded",)]


def test_without_a_worker_the_app_only_enqueues(db_url: str) -> None:
    async def enqueue(request: Request) -> JSONResponse:
        job = await jobrun_client(request).enqueue(NewJob(type="later"))
        return JSONResponse({"job": str(job.id)})

    jobs = Jobrun(database_url=db_url)
    app = Starlette(routes=[Route("/", enqueue, methods=["POST"])], lifespan=jobs.lifespan)
    with TestClient(app) as http:
        assert http.post("/").status_code == 200
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT state::text FROM jobs").fetchall() == [("queued",)]


def test_a_route_of_an_app_without_the_lifespan_is_told_what_to_do() -> None:
    def route(request: Request) -> JSONResponse:
        jobrun_client(request)
        return JSONResponse({})

    app = Starlette(routes=[Route("/", route)])
    with TestClient(app) as http, pytest.raises(LookupError, match="lifespan=Jobrun"):
        http.get("/")


def test_a_route_s_transaction_commits_its_job_with_its_rows_and_a_raise_rolls_both_back(
    db_url: str,
) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int PRIMARY KEY, welcomed bool NOT NULL)")

    async def signup(request: Request) -> JSONResponse:
        user_id = int(request.path_params["user_id"])
        client = jobrun_client(request)
        async with client.transaction() as conn:
            await client.enqueue(NewJob(type="welcome", payload={"id": user_id}), conn=conn)
            await conn.execute("INSERT INTO users VALUES (%s, false)", (user_id,))
        return JSONResponse({})

    jobs = Jobrun(database_url=db_url)
    app = Starlette(
        routes=[Route("/signup/{user_id}", signup, methods=["POST"])], lifespan=jobs.lifespan
    )
    with TestClient(app, raise_server_exceptions=False) as http:
        assert http.post("/signup/1").status_code == 200
        assert http.post("/signup/1").status_code == 500  # the duplicate raised
    with psycopg.connect(db_url) as conn:
        jobs_made = conn.execute("SELECT payload FROM jobs").fetchall()
    assert jobs_made == [({"id": 1},)]


def _mounted(db_url: str, authorize: Any) -> tuple[Jobrun, Starlette]:
    jobs = Jobrun(database_url=db_url)
    app = Starlette(lifespan=jobs.lifespan)
    app.mount("/ops/jobs", jobs.dashboard(authorize=authorize))
    return jobs, app


def test_the_mounted_dashboard_records_the_host_app_s_user_as_the_actor(db_url: str) -> None:
    async def authorize(request: Request) -> str | None:
        return "grace" if request.headers.get("x-user") == "grace" else None

    _, app = _mounted(db_url, authorize)
    with TestClient(app) as http:
        assert http.get("/ops/jobs/").status_code == 403
        headers = {"x-user": "grace"}
        page = http.get("/ops/jobs/queues", headers=headers)
        assert page.status_code == 200
        assert 'action="/ops/jobs/queues/' in page.text or "/ops/jobs/" in page.text
        token = http.get("/ops/jobs/api/csrf", headers=headers).json()["token"]
        paused = http.post(
            "/ops/jobs/api/queues/mail/pause", headers={**headers, "x-csrf-token": token}
        )
        assert paused.status_code == 200, paused.text
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT paused, changed_by FROM queues WHERE name = 'mail'").fetchone()
    assert row == (True, "grace via web")


def test_the_mounted_dashboard_sends_the_host_app_s_own_answer_and_needs_the_lifespan(
    db_url: str,
) -> None:
    def authorize(request: Request) -> Any:
        return PlainTextResponse("log in", 302, {"location": "/login"})

    _, app = _mounted(db_url, authorize)
    with TestClient(app, follow_redirects=False) as http:
        answer = http.get("/ops/jobs/")
        assert (answer.status_code, answer.headers["location"]) == (302, "/login")
    bare = Starlette()
    bare.mount("/ops/jobs", Jobrun(database_url=db_url).dashboard())
    with TestClient(bare) as http:
        answer = http.get("/ops/jobs/")
        assert answer.status_code == 503 and "lifespan=Jobrun" in answer.text


def test_the_lifespan_shows_jobrun_s_records_only_when_nothing_else_handles_them(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    root, jobrun_log = logging.getLogger(), logging.getLogger("jobrun")
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(jobrun_log, "handlers", [])
    monkeypatch.setattr(jobrun_log, "level", logging.NOTSET)
    app = Starlette(lifespan=Jobrun(database_url=db_url).lifespan)
    with TestClient(app):
        assert len(jobrun_log.handlers) == 1
        assert jobrun_log.level == logging.INFO
    mine = logging.StreamHandler()
    monkeypatch.setattr(root, "handlers", [mine])
    monkeypatch.setattr(jobrun_log, "handlers", [])
    with TestClient(Starlette(lifespan=Jobrun(database_url=db_url).lifespan)):
        assert jobrun_log.handlers == []
