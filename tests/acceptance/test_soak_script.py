"""`scripts/soak` still runs: a half-minute soak on the test server prints rows that parse.

The bloat figures come from the real 30-minute run (README); this only keeps
the script from rotting. Nothing here times anything or asserts on bloat.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("jobs", "job_events", "processed_effects", "queues")
ROW = re.compile(r"^\s*\d\d:\d\d\s")


def test_a_short_soak_prints_parsable_samples_and_processes_jobs(pg_admin_url: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "soak"), "--database-url", pg_admin_url,
         "--minutes", "0.5", "--every", "5", "--rate", "50"],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=150,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout

    rows = [line for line in out.splitlines() if ROW.match(line)]
    assert len(rows) >= 3, out
    for line in rows:
        head, *tables = line.split("|")
        _, enqueued, done, rate, due = head.split()
        assert int(enqueued) >= 0 and int(done) >= 0 and float(rate) >= 0 and int(due) >= 0
        assert len(tables) == len(TABLES), line
        for cells in tables:
            live, dead, size, autovacuums, _ago = cells.split()
            assert int(live) >= 0 and int(dead) >= 0 and int(autovacuums) >= 0
            assert re.fullmatch(r"\d+(B|kB|MB|GB)", size), line
    last = rows[-1].split("|")[0].split()
    assert int(last[1]) > 0, out  # jobs were enqueued
    assert int(last[2]) > 0, out  # and processed by the worker

    summary = out[out.index("summary") :]
    assert re.search(r"done [1-9]\d*", summary), summary
    for name in TABLES:
        assert f"  {name}: live max" in summary, summary
        assert f"  {name}: last third vs middle third" in summary, summary
    assert "bounded: " in summary, summary
    assert "autovacuum_vacuum_scale_factor = " in summary, summary
