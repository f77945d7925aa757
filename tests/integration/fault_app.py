"""Handlers for the connection-fault test, run by `jobrun worker --app fault_app`.

``count`` bumps a per-job counter through its commit callback, so the test can
see whether any effect committed twice; ``tick`` is the scheduled job type.
"""

from __future__ import annotations

from typing import Any

from jobrun.domain import CommitCallback
from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("count")
async def count(ctx: JobContext, payload: Any) -> CommitCallback:
    job_id = ctx.job.id

    async def commit(conn: Any) -> None:
        await conn.execute(
            "INSERT INTO fault_counts (job_id, n) VALUES (%s, 1) "
            "ON CONFLICT (job_id) DO UPDATE SET n = fault_counts.n + 1",
            (job_id,),
        )

    return commit


@registry.handler("tick")
async def tick(ctx: JobContext, payload: Any) -> None:
    return None
