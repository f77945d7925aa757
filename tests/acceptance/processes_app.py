"""An application for ``jobrun worker --processes N`` tests: each job records its worker's pid.

A ``proc.record`` job appends ``<job id> <pid>`` to the file named by its
payload's ``out`` (one short ``O_APPEND`` write, so lines from several
processes never interleave), then sleeps ``sleep`` seconds so that a batch
spreads over the processes instead of being drained by the first one.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("proc.record")
async def record(ctx: JobContext, payload: Any) -> None:
    fd = os.open(payload["out"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.job.id} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    await asyncio.sleep(payload.get("sleep", 0.05))
