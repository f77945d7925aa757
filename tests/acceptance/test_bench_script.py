"""`scripts/bench --processes` runs end to end at a tiny size, so the benchmark cannot rot.

It starts `jobrun worker --processes N` from the CLI, enqueues, watches the queue
drain and reads the last job's finish time; nothing here is timed, the run must
only finish and print its row.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_processes_drains_through_the_cli_and_prints_its_row(pg_admin_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")}
    env["JOBRUN_DATABASE_URL"] = pg_admin_url
    result = subprocess.run(
        [
            sys.executable, str(ROOT / "scripts" / "bench"), "--processes", "1,2",
            "--jobs", "300", "--rounds", "1",
        ],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for n in (1, 2):
        assert f"worker --processes {n}" in result.stdout, result.stdout
    assert "300 jobs" in result.stdout, result.stdout
