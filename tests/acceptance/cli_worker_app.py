"""A tiny application for ``jobrun worker --app tests.acceptance.cli_worker_app``."""

from __future__ import annotations

import gc
from typing import Any

from pydantic import BaseModel

from jobrun.registry import JobContext, Registry

registry = Registry()


class Greeting(BaseModel):
    name: str


@registry.handler("cli.greet", payload=Greeting)
async def greet(ctx: JobContext, payload: Greeting) -> None:
    ctx.logger.info("hello %s", payload.name)


@registry.handler("cli.echo")
async def echo(ctx: JobContext, payload: Any) -> None:
    ctx.logger.info("echo %s", payload)


@registry.handler("cli.gc_threshold")
async def gc_threshold(ctx: JobContext, payload: Any) -> None:
    """Log the cyclic collector's thresholds as the handler sees them."""
    ctx.logger.info("gc thresholds %s", ",".join(map(str, gc.get_threshold())))
