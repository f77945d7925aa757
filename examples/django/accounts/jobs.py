"""The accounts app's jobs, discovered by jobrun's Django app when Django starts."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from jobrun import JobContext
from jobrun.integrations.django import registry


class Welcome(BaseModel):
    """The welcome job's payload."""

    email: str
    name: str


@registry.handler("welcome", payload=Welcome, max_attempts=5)
async def send_welcome(ctx: JobContext, payload: Welcome) -> Any:
    """Compose the welcome; its outbox row commits with the job's completion, once."""
    body = f"Hello {payload.name}, welcome aboard."

    async def commit(conn: Any) -> None:
        await conn.execute(
            "INSERT INTO accounts_outbox (email, body) VALUES (%s, %s)", (payload.email, body)
        )

    return commit
