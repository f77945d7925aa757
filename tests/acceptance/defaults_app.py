"""An application declaring job options with its handler, for ``jobrun enqueue --app``."""

from __future__ import annotations

from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("mail.welcome", queue="mail", priority=5, max_attempts=3)
async def welcome(ctx: JobContext, payload: Any) -> None:
    ctx.logger.info("welcome %s", payload)


@registry.handler("mail.digest", idempotency_key=("user_id",))
async def digest(ctx: JobContext, payload: Any) -> None:
    ctx.logger.info("digest %s", payload)
