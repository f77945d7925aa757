"""Serving a client's metrics: the optional Prometheus extra loaded on demand, and its server.

Kept apart from :mod:`jobrun.telemetry.prometheus` so that importing jobrun
never imports ``prometheus_client``: :func:`load_metrics` imports it when a
metrics port is configured, and says which extra to install when it is missing.
"""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType
from typing import Any

from jobrun.errors import ConfigurationError

__all__ = ["METRICS_EXTRA", "load_metrics", "serve_metrics"]

METRICS_EXTRA = "pip install 'jobrun[metrics]'"


def load_metrics() -> ModuleType:
    """:mod:`jobrun.telemetry.prometheus`, imported now; ConfigurationError without its extra."""
    try:
        return importlib.import_module("jobrun.telemetry.prometheus")
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "prometheus_client":
            raise
        raise ConfigurationError(
            f"metrics need the prometheus_client package: {METRICS_EXTRA}"
        ) from None


async def serve_metrics(client: Any, done: asyncio.Event) -> tuple[Any, asyncio.Task[None]]:
    """Serve /metrics, /healthz, /readyz for ``client``; run its queue-gauge leader until ``done``.

    Returns the started server (the caller closes it) and the publisher's task.
    """
    metrics = load_metrics()
    config = client.config
    assert config.metrics_port is not None
    server = metrics.MetricsServer(
        client.metrics, client.ready, host=config.metrics_host, port=config.metrics_port
    )
    await server.start()
    publisher = metrics.QueueStatsPublisher(
        client.store, client.locker(), client.metrics, every=config.queue_stats_every
    )
    return server, asyncio.create_task(publisher.run(done), name="jobrun-queue-stats")
