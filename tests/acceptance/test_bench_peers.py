"""`scripts/bench-peers --jobrun-only` runs end to end, so the benchmark cannot rot.

Only its jobrun half, at tiny sizes: the peers need a throwaway venv from PyPI, too
slow for the suite. Nothing here is timed; the script's own checks (every job enqueued
and done, counted in the database) are what must pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_peers_jobrun_half_runs_and_verifies_every_sample(pg_admin_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")}
    env["JOBRUN_DATABASE_URL"] = pg_admin_url
    result = subprocess.run(
        [
            sys.executable, str(ROOT / "scripts" / "bench-peers"), "--quick", "--rounds", "1",
            "--jobrun-only", "--jobs", "200", "--wake-samples", "3",
            "--jobrun-concurrency", "", "--callback-concurrency", "20",
        ],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for step in ("jobrun enqueue single", "jobrun enqueue batch_1000", "jobrun wake-up p50",
                 "jobrun no-op defaults", "jobrun callback c20", "jobrun no-op processes 2",
                 "jobrun callback processes 2", "jobrun Effect c20",
                 "jobrun Effect processes 2", "summary:"):  # fmt: skip
        assert step in result.stdout, result.stdout
    # The test server runs on this machine (embedded, or the CI host's own), so
    # the server's CPU per job is read for every sample.
    assert "server CPU/job, batch enqueue (calls of 1,000)" in result.stdout, result.stdout
    assert "worker process CPU/job, no-op processing (defaults)" in result.stdout, result.stdout
