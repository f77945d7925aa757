"""Handlers for the soak's `jobrun worker --app soak_app` subprocess (PYTHONPATH=scripts).

The mix `scripts/soak` enqueues: ``noop`` does nothing (also used for the
delayed jobs), ``effect`` returns a commit callback that writes one row of
``soak_effects`` in the completion transaction (so the effect ledger gets a
row per job), and ``flaky`` fails its first attempt and succeeds on the retry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("noop")
async def noop(ctx: JobContext, payload: Any) -> None:
    """Does nothing: the soak measures the tables, not the handler."""


@registry.handler("effect")
async def effect(ctx: JobContext, payload: Any) -> Callable[[Any], Awaitable[None]]:
    job_id = ctx.job.id

    async def commit(conn: Any) -> None:
        await conn.execute("INSERT INTO soak_effects (job_id) VALUES (%s)", (job_id,))

    return commit


@registry.handler("flaky")
async def flaky(ctx: JobContext, payload: Any) -> None:
    if ctx.job.attempts <= 1:
        raise RuntimeError("soak: first attempt fails on purpose")
