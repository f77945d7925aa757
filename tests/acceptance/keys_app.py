"""Handlers for the per-key concurrency race, for ``jobrun worker --app tests.acceptance.keys_app``.

Each job works a little (so several of one key would overlap if allowed) and
writes one effect row that commits with its completion.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jobrun.domain import Effect
from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("keys.work")
async def work(ctx: JobContext, payload: Any) -> Effect:
    await asyncio.sleep(0.03)  # simulated work
    return Effect(
        "INSERT INTO keys_effects (job_id, key) VALUES (%s, %s)", (ctx.job.id, payload["key"])
    )
