"""`scripts/plans`: a plan that changes fails --check with its diff, a broken rule names its query.

The report runs on a copy of the repository, as a pull request would change
it, at a small scale (the committed plans are at 1,000,000 jobs; CI checks
those): its plans are written under a scratch folder, checked unchanged, then
checked again after a new migration drops the index the dead-jobs listing
reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", "__pycache__", "site"}


def _copy_repository(target: Path) -> Path:
    archive = target / "repo.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(ROOT, arcname="repo", filter=lambda t: None if Path(t.name).name in SKIPPED else t)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target / "repo"


def _env() -> dict[str, str]:
    # A copy has no .venv: the wrapper then runs python3 from PATH, this test's.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path}


def _plans(
    repo: Path, server_url: str, out: Path, *args: str, query: str = "JobList", jobs: int = 50_000
) -> subprocess.CompletedProcess[str]:
    scale = ["--jobs", str(jobs), "--out", str(out), "--query", query]
    return subprocess.run(
        [str(repo / "scripts" / "plans"), *scale, "--database-url", server_url, *args],
        capture_output=True,
        text=True,
        cwd=repo,
        env=_env(),
        timeout=300,
    )


def test_dropping_the_listing_index_fails_the_check_naming_the_query_and_the_rule(
    pg_admin_url: str, tmp_path: Path
) -> None:
    repo = _copy_repository(tmp_path)
    out = tmp_path / "plans"

    written = _plans(repo, pg_admin_url, out)
    assert written.returncode == 0, written.stdout + written.stderr
    committed = (out / "db" / "plans" / "jobs" / "JobList.txt").read_text()
    assert "Index Scan Backward using jobs_dead_cancelled_idx on jobs" in committed

    unchanged = _plans(repo, pg_admin_url, out, "--check")
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr

    (repo / "migrations" / "00099_drop_listing_index.sql").write_text(
        "-- +goose Up\nDROP INDEX jobs_dead_cancelled_idx;\n"
    )
    regressed = _plans(repo, pg_admin_url, out, "--check")
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    errors = regressed.stderr
    assert (
        "db/query/jobs.sql: JobList [dead]: plan rule "
        "'jobs only by index jobs_dead_cancelled_idx' broken: reads jobs by"
    ) in errors
    # The plan diff a reviewer reads: the index's scan goes, another comes.
    assert "--- a/db/plans/jobs/JobList.txt" in errors
    assert "-  -> Index Scan Backward using jobs_dead_cancelled_idx on jobs" in errors
    assert "plan file(s) differ from the committed ones" in errors
    # The committed file is left as it was: --check writes nothing.
    assert (out / "db" / "plans" / "jobs" / "JobList.txt").read_text() == committed


def test_a_scale_other_than_the_committed_one_must_be_written_elsewhere() -> None:
    result = subprocess.run(
        [str(ROOT / "scripts" / "plans"), "--jobs", "5000", "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=60,
    )
    assert result.returncode == 2
    assert "the committed plans are at 1,000,000 jobs" in result.stderr


def test_the_migration_review_shows_an_index_built_without_concurrently_blocking_writes(
    pg_admin_url: str, tmp_path: Path
) -> None:
    repo = _copy_repository(tmp_path)
    (repo / "migrations" / "00099_type_index.sql").write_text(
        "-- +goose Up\nCREATE INDEX jobs_type_idx ON jobs (type);\n"
    )
    out = tmp_path / "plans"
    result = subprocess.run(
        [
            str(repo / "scripts" / "plans"),
            *("--jobs", "20000", "--out", str(out), "--database-url", pg_admin_url),
        ],
        capture_output=True,
        text=True,
        cwd=repo,
        env=_env(),
        timeout=300,
    )
    # At 20,000 jobs some plans legitimately break rules made for a million;
    # the review is written either way.
    assert "00099_type_index.sql" in result.stdout, result.stdout + result.stderr
    review = (out / "db" / "plans" / "migrations" / "00099_type_index.txt").read_text()
    assert "1. CREATE INDEX jobs_type_idx ON jobs (type);" in review
    assert "locks: SHARE on jobs (blocks writes)" in review
    assert (
        "builds an index on jobs without CONCURRENTLY: it reads all 20,000 rows "
        "while writes to jobs wait"
    ) in review
    assert review.rstrip().endswith(
        "verdict: blocks writes of jobs, each held until the migration commits"
    )
    # A catalog-only change says so.
    meta = (out / "db" / "plans" / "migrations" / "00005_job_meta.txt").read_text()
    assert "ACCESS EXCLUSIVE on jobs (blocks reads and writes)" in meta
    assert "catalog only: no row read or rewritten under the lock" in meta


def test_an_idle_claim_that_walks_the_delayed_jobs_breaks_its_buffer_rule(
    pg_admin_url: str, tmp_path: Path
) -> None:
    # The rule moved here from scripts/vet: an index in the right order for due jobs but
    # not for the loose scan over priority levels makes each level a walk of the queue's
    # delayed jobs, which only a table holding many of them shows.
    repo = _copy_repository(tmp_path)
    out = tmp_path / "plans"
    claim = {"query": "JobClaim", "jobs": 400_000}
    written = _plans(repo, pg_admin_url, out, **claim)  # type: ignore[arg-type]
    assert written.returncode == 0, written.stdout + written.stderr
    (repo / "migrations" / "00099_claim_by_time.sql").write_text(
        "-- +goose Up\nDROP INDEX jobs_claim_idx;\n"
        "CREATE INDEX jobs_claim_by_time_idx ON jobs (queue, run_at, priority, id)"
        " WHERE state = 'queued';\n"
    )
    regressed = _plans(repo, pg_admin_url, out, "--check", **claim)  # type: ignore[arg-type]
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    assert "db/query/jobs.sql: JobClaim [idle]: plan rule" in regressed.stderr, regressed.stderr
