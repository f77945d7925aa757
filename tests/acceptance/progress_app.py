"""Handlers that report progress, for ``jobrun worker --app tests.acceptance.progress_app``.

Each reports where it is, then works (waits) until the file its payload
names exists, so the test can look at the job while it runs and then let
it finish.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("progress.async")
async def report_async(ctx: JobContext, payload: Any) -> None:
    ctx.progress(0.25, "reading")
    ctx.progress(0.5, "resizing images")  # only the latest report is written
    release = Path(payload["release"])
    # The work this handler simulates: until the test lets it finish.
    while not await asyncio.to_thread(release.exists):  # noqa: ASYNC110
        await asyncio.sleep(0.05)


@registry.handler("progress.sync")
def report_sync(ctx: JobContext, payload: Any) -> None:
    ctx.progress(0.75, "from a thread")
    release = Path(payload["release"])
    while not release.exists():
        time.sleep(0.05)  # the work this handler simulates
