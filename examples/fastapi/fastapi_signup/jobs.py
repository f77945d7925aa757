"""The service's jobs: the welcome email, recorded once by its commit callback.

``jobrun worker --app fastapi_signup.jobs`` runs them; the web app enqueues
them through the same registry.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from jobrun import JobContext, Registry

registry = Registry()


class Welcome(BaseModel):
    """The welcome job's payload."""

    email: str
    name: str


@registry.handler("welcome", payload=Welcome, max_attempts=5)
async def send_welcome(ctx: JobContext, payload: Welcome) -> Any:
    """Compose the welcome email; the outbox row commits with the job's completion."""
    body = f"Hello {payload.name}, welcome aboard."

    async def commit(conn: Any) -> None:
        # Runs in the transaction that records the job as succeeded: if this
        # attempt's completion does not commit, neither does the email, and a
        # retry cannot send it twice.
        await conn.execute(
            "INSERT INTO outbox (email, body) VALUES (%s, %s)", (payload.email, body)
        )

    return commit
