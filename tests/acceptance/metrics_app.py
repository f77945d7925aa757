"""Handlers for ``jobrun worker --metrics-port``: one succeeds, one fails once, one always fails."""

from __future__ import annotations

import logging
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()
log = logging.getLogger("metrics_app")


@registry.handler("obs.ok")
async def ok(ctx: JobContext, payload: Any) -> None:
    # A plain logger, not ctx.logger: the job fields come from the log filter.
    log.info("ok handler ran")


@registry.handler("obs.flaky")
def flaky(ctx: JobContext, payload: Any) -> None:
    if ctx.job.attempts == 1:
        raise RuntimeError("first attempt fails")


@registry.handler("obs.broken")
async def broken(ctx: JobContext, payload: Any) -> None:
    raise RuntimeError("always fails")
