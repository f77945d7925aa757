"""FastAPI dependencies for jobrun: the app's client, and a transaction for a route.

::

    from jobrun.integrations.fastapi import Client, Transaction
    from jobrun.integrations.starlette import Jobrun

    jobs = Jobrun(registry, worker=True)
    app = FastAPI(lifespan=jobs.lifespan)

    @app.post("/signup")
    async def signup(form: Signup, client: Client, conn: Transaction) -> dict[str, str]:
        await conn.execute("INSERT INTO users (email) VALUES (%s)", (form.email,))
        job = await client.enqueue(NewJob(type="welcome"), conn=conn)
        return {"job": str(job.id)}

``Transaction`` is a psycopg ``AsyncConnection`` from the client's pool in a
transaction that commits when the route returns and rolls back when it
raises (an ``HTTPException`` included), so the job exists exactly when the
route's rows do. It is declared with FastAPI's ``scope="function"``: the
commit happens before the response is sent, so a response the client sees
means the job is stored, and a failed commit is an error response, not a
success followed by a lost job.

Importing this module imports FastAPI (the ``jobrun[fastapi]`` extra).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Depends, Request

from jobrun.client import Client as _Client
from jobrun.integrations import starlette

__all__ = ["Client", "Transaction", "app_client", "route_transaction"]


def app_client(request: Request) -> _Client:
    """The app's open :class:`jobrun.Client` (its lifespan is ``Jobrun.lifespan``)."""
    return starlette.jobrun_client(request)


async def route_transaction(request: Request) -> AsyncIterator[Any]:
    """A connection in a transaction on the app's client, for the length of the route."""
    async with starlette.jobrun_client(request).transaction() as conn:
        yield conn


Client = Annotated[_Client, Depends(app_client)]
"""A route parameter annotated ``Client`` receives the app's open jobrun client."""

Transaction = Annotated[Any, Depends(route_transaction, scope="function")]
"""A route parameter annotated ``Transaction`` receives a psycopg ``AsyncConnection`` in a
transaction, committed before the response is sent and rolled back if the route raises."""
