"""Handlers of the diamond workflows, for ``jobrun worker --app tests.acceptance.diamond_app``.

Each step works a little (the branches and the top longer than the bottom,
so a bottom that did not wait would finish first) and writes one effect row,
keyed by its job id, that commits with its completion.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jobrun.domain import Effect
from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("diamond.step")
async def step(ctx: JobContext, payload: Any) -> Effect:
    await asyncio.sleep(0 if payload["step"] == "bottom" else 0.05)  # simulated work
    return Effect(
        "INSERT INTO diamond_effects (job_id, diamond, step) VALUES (%s, %s, %s)",
        (ctx.job.id, payload["diamond"], payload["step"]),
    )
