"""Bad settings and misuse raise errors of the one tree, never a bare ValueError/RuntimeError."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

import jobrun
import jobrun.registry
from jobrun import errors
from jobrun._threads import DaemonThreadPool
from jobrun.config import Config
from jobrun.cron import next_fire
from jobrun.postgres.lock import AdvisoryLocker
from jobrun.postgres.notify import Notifier
from jobrun.registry import Registry
from jobrun.scheduler import Scheduler
from jobrun.worker import Worker

URL = "postgresql://nobody@127.0.0.1:1/none"


def test_invalid_payload_is_in_the_tree_and_exported() -> None:
    assert jobrun.errors.InvalidPayload is jobrun.registry.InvalidPayload
    assert jobrun.InvalidPayload is jobrun.errors.InvalidPayload
    assert "InvalidPayload" in errors.__all__
    assert "InvalidPayload" in jobrun.__all__
    assert "InvalidPayload" in (errors.__doc__ or "")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tick": timedelta(0)}, "tick"),
        ({"retry_leadership_every": timedelta(seconds=-1)}, "retry_leadership_every"),
        ({"tick": 1.0}, "tick must be a timedelta"),
    ],
)
def test_scheduler_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=message):
        Scheduler(None, None, **kwargs)  # type: ignore[arg-type]


def test_notifier_settings_and_misuse() -> None:
    with pytest.raises(errors.ConfigurationError, match="channel"):
        Notifier(URL, "")
    notifier = Notifier(URL)
    with pytest.raises(errors.ConfigurationError, match="at least one queue"):
        notifier.subscribe([])

    async def closed() -> None:
        await notifier.close()
        await notifier.open()

    with pytest.raises(errors.UsageError, match="closed"):
        asyncio.run(closed())


def test_locker_settings() -> None:
    with pytest.raises(errors.ConfigurationError, match="probe_every"):
        AdvisoryLocker(URL, probe_every=timedelta(0))
    with pytest.raises(errors.ConfigurationError, match="bigint"):
        asyncio.run(AdvisoryLocker(URL).try_acquire(2**63))


def test_thread_pool_settings_and_misuse() -> None:
    with pytest.raises(errors.ConfigurationError, match="max_workers"):
        DaemonThreadPool(0)
    pool = DaemonThreadPool(1)
    pool.shutdown()
    with pytest.raises(errors.UsageError, match="shut down"):
        pool.submit(print)


def test_worker_misuse() -> None:
    w = Worker(None, Registry(), Config(concurrency=10, reap_every=None), owner="w")  # type: ignore[arg-type]
    with pytest.raises(errors.UsageError, match="not running"):
        w.request_stop()


def test_cron_refuses_a_naive_time() -> None:
    with pytest.raises(errors.InvalidSchedule, match="timezone-aware"):
        next_fire("* * * * *", "UTC", datetime(2024, 1, 1))
