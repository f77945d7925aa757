"""Handlers for the dashboard browser tests (`jobrun worker --app` this module)."""

from __future__ import annotations

import asyncio
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("web.nap")
async def nap(ctx: JobContext, payload: Any) -> None:
    await asyncio.sleep(float(payload.get("seconds", 0.2)))


@registry.handler("web.boom")
async def boom(ctx: JobContext, payload: Any) -> None:
    raise RuntimeError("boom, as asked")
