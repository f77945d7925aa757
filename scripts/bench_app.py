"""Handlers for the benchmark's `jobrun worker --app bench_app` subprocess (PYTHONPATH=scripts).

``ping`` prints its job id and the wall-clock time of handler entry on stdout,
so the benchmark measures wake-up through the worker exactly as users start it.
``noop`` does nothing; ``effect`` returns a commit callback that writes one row to
``bench_effects`` in the completion transaction (scripts/bench-peers creates it), and
``effect_stmt`` the same row as an :class:`~jobrun.Effect`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from jobrun import Effect
from jobrun.registry import JobContext, Registry

registry = Registry()


@registry.handler("ping")
async def ping(ctx: JobContext, payload: Any) -> None:
    sys.stdout.write(f"{ctx.job.id} {time.time():.6f}\n")
    sys.stdout.flush()


@registry.handler("noop")
async def noop(ctx: JobContext, payload: Any) -> None:
    """Does nothing: `scripts/bench --processes` measures the queue, not the handler."""


@registry.handler("effect")
async def effect(ctx: JobContext, payload: Any) -> Callable[[Any], Awaitable[None]]:
    """Writes one row in the completion transaction: the exactly-once path."""

    async def commit(conn: Any) -> None:
        await conn.execute("INSERT INTO bench_effects (job_id) VALUES (%s)", (ctx.job.id,))

    return commit


@registry.handler("effect_stmt")
async def effect_stmt(ctx: JobContext, payload: Any) -> Effect:
    """The same row as ``effect``, as one statement the worker batches."""
    return Effect("INSERT INTO bench_effects (job_id) VALUES (%s)", (ctx.job.id,))
