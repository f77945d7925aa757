"""A tiny application for ``jobrun worker --app tests.acceptance.cli_worker_app``."""

from __future__ import annotations

from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("cli.echo")
async def echo(ctx: JobContext, payload: Any) -> None:
    ctx.logger.info("echo %s", payload)
