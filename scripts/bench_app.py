"""Handlers for the benchmark's `jobrun worker --app bench_app` subprocess (PYTHONPATH=scripts).

``ping`` prints its job id and the wall-clock time of handler entry on stdout,
so the benchmark measures wake-up through the worker exactly as users start it.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("ping")
async def ping(ctx: JobContext, payload: Any) -> None:
    sys.stdout.write(f"{ctx.job.id} {time.time():.6f}\n")
    sys.stdout.flush()


@registry.handler("noop")
async def noop(ctx: JobContext, payload: Any) -> None:
    """Does nothing: `scripts/bench --processes` measures the queue, not the handler."""
