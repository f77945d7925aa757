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
from starlette.responses import JSONResponse
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
