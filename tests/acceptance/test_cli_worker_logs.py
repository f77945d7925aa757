"""What ``jobrun worker`` logs, as a process: why an attempt failed, and a true count at stop.

The text format used to log a failure as ``failed:queued in 19.8ms``, its
reason only in the JSON format's extra field; and the stop line counted every
recorded outcome as completed (``1 jobs completed`` for a job handed back).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from datetime import timedelta
from pathlib import Path

import pytest
from tests.acceptance.test_cli_worker import wait_for_line, wait_for_trace, worker

from jobrun import Backoff, Client, NewJob


async def enqueue_three(db_url: str, trace: Path) -> None:
    async with Client(database_url=db_url) as client:
        # An hour's backoff: the failed job stays queued, not run again, while the test runs.
        later = Backoff(base=timedelta(hours=1))
        await client.enqueue(NewJob(type="boom", payload={"message": "boom"}, backoff=later))
        await client.enqueue(NewJob(type="mark", payload={"trace": str(trace)}))
        await client.enqueue(NewJob(type="nap", payload={"trace": str(trace), "sleep": 120}))


def message(line: str, log_format: str) -> str:
    return str(json.loads(line)["message"]) if log_format == "json" else line


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_failure_line_names_its_reason_and_the_stop_line_counts_truly(
    db_url: str, tmp_path: Path, log_format: str
) -> None:
    trace = tmp_path / "trace"
    asyncio.run(enqueue_three(db_url, trace))
    options = ("--log-format", log_format, "--poll", "200ms", "--shutdown-grace", "1s")
    with worker(db_url, *options) as proc:
        failed = message(wait_for_line(proc, "failed:queued"), log_format)
        # The one-line reason is on the line itself, in every format.
        assert re.search(r"failed:queued in [\d.]+ms: ValueError: boom\b", failed), failed
        wait_for_trace(trace, 2, timeout=30)  # mark ran, nap is running
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    (stopped,) = [line for line in stderr.splitlines() if "stopped:" in line]
    stopped = message(stopped, log_format)
    # One succeeded, one failed and queued again, one handed back at shutdown.
    assert "1 job succeeded, 1 failed (to retry), 1 handed back" in stopped, stopped
    assert "(3 outcomes recorded in" in stopped, stopped
    assert "jobs completed" not in stderr and " 1 jobs " not in stderr, stderr
