"""Handlers of a fan-out and its fan-in, for ``jobrun worker --app tests.acceptance.fanout_app``.

Each part writes one effect row and returns its number (or fails, for the
parts told to); the fan-in, which depends on every part, writes one row
counting how the parts it names ended, as its completion sees them; a
group's callback writes one row from what ``ctx.dependencies()`` tells it.
"""

from __future__ import annotations

from typing import Any

from jobrun.domain import Effect, Result
from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("fan.part")
async def part(ctx: JobContext, payload: Any) -> Result:
    if payload.get("fail"):
        raise RuntimeError("this part was told to fail")
    effect = Effect("INSERT INTO fan_effects (job_id) VALUES (%s)", (ctx.job.id,))
    return Result(payload.get("n", 0), commit=effect)


@registry.handler("fan.in")
async def fan_in(ctx: JobContext, payload: Any) -> Effect:
    return Effect(
        "INSERT INTO fan_in_runs (job_id, succeeded, ended) "
        "SELECT %s, count(*) FILTER (WHERE state = 'succeeded'), "
        "count(*) FILTER (WHERE state IN ('succeeded', 'dead', 'cancelled')) "
        "FROM jobs WHERE id = ANY (%s::uuid[])",
        (ctx.job.id, payload["parts"]),
    )


@registry.handler("fan.report")
async def report(ctx: JobContext, payload: Any) -> Effect:
    """A group's callback: counts its parts' outcomes and sums their results as it reads them."""
    parts = await ctx.dependencies()
    succeeded = [p for p in parts if p.succeeded]
    return Effect(
        "INSERT INTO fan_in_runs (job_id, succeeded, ended, total) VALUES (%s, %s, %s, %s)",
        (ctx.job.id, len(succeeded), sum(p.state is not None for p in parts),
         sum(p.result for p in succeeded)),
    )  # fmt: skip
