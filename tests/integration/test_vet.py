"""`scripts/vet`: every query prepares, and the claim reads its own index.

The plans at scale (the idle claim's buffers, the state listings' indexes, the fenced
updates) are scripts/plans' rules: see test_plans.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

ROOT = Path(__file__).resolve().parents[2]


def vet(db_url: str) -> subprocess.CompletedProcess[str]:
    params = conninfo_to_dict(db_url)
    user, host = params.get("user", "postgres"), str(params.get("host", "localhost"))
    port, dbname = params.get("port", 5432), params["dbname"]
    # sqlc wants a URL, not a key=value string; a socket directory goes in the query.
    if host.startswith("/"):
        url = f"postgresql://{user}@/{dbname}?host={host}&port={port}"
    else:
        url = f"postgresql://{user}@{host}:{port}/{dbname}"
    return subprocess.run(
        [str(ROOT / "scripts" / "vet"), url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=120,
    )


def test_vet_passes_on_the_migrated_schema(db_url: str) -> None:
    result = vet(db_url)
    assert result.returncode == 0, result.stdout + result.stderr


def test_vet_fails_when_the_claim_would_scan_the_jobs_table(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("DROP INDEX jobs_claim_idx")
    result = vet(db_url)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    # Without its own index the claim must be reported, whatever else it reads.
    assert "JobClaim: claim-reads-claim-index" in output
