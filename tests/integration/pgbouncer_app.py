"""Handlers for the PgBouncer tests, run by ``jobrun worker --app pgbouncer_app``.

- ``count``: the commit callback bumps ``bouncer_counts(job_id, n)``, so
  ``n = 1`` for every job proves each effect committed exactly once.
- ``hang_first``: appends ``start <job id> <attempt>`` to the file named by
  ``payload["trace"]`` (outside any transaction, so the test sees it while the
  job is leased); the first attempt then hangs until its process is killed,
  later ones count like ``count``.
- ``tick``: the scheduled job type; does nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from jobrun.domain import CommitCallback
from jobrun.registry import JobContext, Registry

registry = Registry()


def _counting(job_id: Any) -> CommitCallback:
    async def commit(conn: Any) -> None:
        await conn.execute(
            "INSERT INTO bouncer_counts (job_id, n) VALUES (%s, 1) "
            "ON CONFLICT (job_id) DO UPDATE SET n = bouncer_counts.n + 1",
            (job_id,),
        )

    return commit


@registry.handler("count")
async def count(ctx: JobContext, payload: Any) -> CommitCallback:
    return _counting(ctx.job.id)


def _trace(ctx: JobContext, payload: Any) -> None:
    with Path(payload["trace"]).open("a") as trace:
        trace.write(f"start {ctx.job.id} {ctx.job.attempts}\n")


@registry.handler("hang_first")
async def hang_first(ctx: JobContext, payload: Any) -> CommitCallback:
    _trace(ctx, payload)
    if ctx.job.attempts == 1:
        await asyncio.Event().wait()  # until the test kills this process
    return _counting(ctx.job.id)


@registry.handler("tick")
async def tick(ctx: JobContext, payload: Any) -> None:
    return None
