"""Version 2 of the application of ``periodic_v1_app`` (see there): the next deploy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.periodic("* * * * * *", payload={"version": 2})
@registry.handler("report.build", queue="periodic-v2")
async def build_report(ctx: JobContext, payload: Any) -> None:
    ctx.logger.info("report %s", payload)


registry.periodic(type="ops.ping", every=timedelta(seconds=1), name="v2-only", queue="periodic-v2")
