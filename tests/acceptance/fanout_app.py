"""Handlers of a fan-out and its fan-in, for ``jobrun worker --app tests.acceptance.fanout_app``.

Each part writes one effect row (or fails, for the parts told to); the
fan-in, which depends on every part, writes one row counting how the parts
it names ended, as its completion sees them.
"""

from __future__ import annotations

from typing import Any

from jobrun.domain import Effect
from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("fan.part")
async def part(ctx: JobContext, payload: Any) -> Effect:
    if payload.get("fail"):
        raise RuntimeError("this part was told to fail")
    return Effect("INSERT INTO fan_effects (job_id) VALUES (%s)", (ctx.job.id,))


@registry.handler("fan.in")
async def fan_in(ctx: JobContext, payload: Any) -> Effect:
    return Effect(
        "INSERT INTO fan_in_runs (job_id, succeeded, ended) "
        "SELECT %s, count(*) FILTER (WHERE state = 'succeeded'), "
        "count(*) FILTER (WHERE state IN ('succeeded', 'dead', 'cancelled')) "
        "FROM jobs WHERE id = ANY (%s::uuid[])",
        (ctx.job.id, payload["parts"]),
    )
