"""Version 1 of an application declaring periodic jobs, for the rolling-deploy test.

Beside it, ``periodic_v2_app`` is the next version of the same code: the
report runs every second instead of every two, with another payload and in
another queue, ``v1-only`` is gone and ``v2-only`` is new. The schedules fire
in seconds (6-field cron, 1 s interval) so a deploy is watched in real time
without waiting minutes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.periodic("*/2 * * * * *", payload={"version": 1})
@registry.handler("report.build", queue="periodic-v1")
async def build_report(ctx: JobContext, payload: Any) -> None:
    ctx.logger.info("report %s", payload)


registry.periodic(type="ops.ping", every=timedelta(seconds=1), name="v1-only", queue="periodic-v1")
