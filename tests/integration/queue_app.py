"""An application for the queue-control process tests, run by ``jobrun worker --app queue_app``.

``nap`` sleeps ``payload["sleep"]`` seconds (default 0.2), long enough for the
test to sample how many jobs of a queue are leased at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("nap")
async def nap(ctx: JobContext, payload: Any) -> None:
    await asyncio.sleep(float(payload.get("sleep", 0.2)))
