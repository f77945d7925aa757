"""Handlers for ``jobrun worker --app tests.acceptance.worker_defects_app``.

Each handler leaves its trace in a file named by the payload, outside any
transaction, so a test can see when (and how often) a handler started even
while the job is still leased.

- ``mark``: appends ``start <job id> <attempt> <unix time>`` and returns.
- ``stubborn``: a sync handler that ignores its cancellation token: appends a
  start line, sleeps ``payload["sleep"]`` seconds, appends an end line.
- ``nap``: appends a start line, then sleeps ``payload["sleep"]`` seconds.
- ``boom``: raises ``ValueError(payload["message"])``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


def _trace(ctx: JobContext, payload: Any, what: str) -> None:
    with Path(payload["trace"]).open("a") as trace:
        trace.write(f"{what} {ctx.job.id} {ctx.job.attempts} {time.time():.6f}\n")


@registry.handler("mark")
async def mark(ctx: JobContext, payload: Any) -> None:
    _trace(ctx, payload, "start")


@registry.handler("stubborn")
def stubborn(ctx: JobContext, payload: Any) -> None:
    _trace(ctx, payload, "start")
    time.sleep(float(payload["sleep"]))  # never looks at ctx.token
    _trace(ctx, payload, "end")


@registry.handler("nap")
async def nap(ctx: JobContext, payload: Any) -> None:
    _trace(ctx, payload, "start")
    await asyncio.sleep(float(payload["sleep"]))


@registry.handler("boom")
async def boom(ctx: JobContext, payload: Any) -> None:
    raise ValueError(payload["message"])
