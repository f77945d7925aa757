"""The signup service: a FastAPI app that writes a user and enqueues their welcome together.

    uvicorn fastapi_signup.app:app            # JOBRUN_DATABASE_URL names the database

``POST /signup`` enqueues the welcome job and inserts the user in one
transaction: a duplicate email rolls both back (409), so no welcome goes to a
signup that did not happen. The jobs dashboard is mounted at ``/admin/jobs``
behind this app's own check of a bearer token (``SIGNUP_ADMIN_TOKEN``).
``SIGNUP_WORKER=1`` runs a worker inside the app; otherwise run
``jobrun worker --app fastapi_signup.jobs`` beside it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from fastapi_signup.jobs import Welcome, registry
from jobrun.integrations.fastapi import Client, Transaction
from jobrun.integrations.starlette import Jobrun

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id    bigserial PRIMARY KEY,
    email text NOT NULL UNIQUE,
    name  text NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    id    bigserial PRIMARY KEY,
    email text NOT NULL,
    body  text NOT NULL
);
"""

jobs = Jobrun(registry, worker=os.environ.get("SIGNUP_WORKER") == "1")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
    """jobrun's lifespan, then the service's own tables."""
    async with jobs.lifespan(app) as state:
        assert jobs.client is not None
        async with jobs.client.transaction() as conn:
            await conn.execute(SCHEMA)
        yield state


app = FastAPI(lifespan=lifespan)


def operator(request: Request) -> str | PlainTextResponse:
    """The service's own authentication for its admin pages: a bearer token."""
    expected = os.environ.get("SIGNUP_ADMIN_TOKEN", "")
    given = request.headers.get("authorization", "").removeprefix("Bearer ")
    if expected and secrets.compare_digest(given.encode(), expected.encode()):
        return "admin"
    return PlainTextResponse("sign in first\n", 401, {"WWW-Authenticate": "Bearer"})


app.mount("/admin/jobs", jobs.dashboard(authorize=operator))


class Signup(BaseModel):
    """A signup form."""

    email: str
    name: str


@app.post("/signup", status_code=201)
async def signup(form: Signup, client: Client, conn: Transaction) -> dict[str, str]:
    """Enqueue the welcome and insert the user, in one transaction."""
    job = await client.enqueue(
        registry.new_job("welcome", Welcome(email=form.email, name=form.name)), conn=conn
    )
    try:
        await conn.execute(
            "INSERT INTO users (email, name) VALUES (%s, %s)", (form.email, form.name)
        )
    except psycopg.errors.UniqueViolation:
        # Raising rolls the transaction back: the welcome job goes with it.
        raise HTTPException(409, f"{form.email} has signed up already") from None
    return {"job": str(job.id)}
