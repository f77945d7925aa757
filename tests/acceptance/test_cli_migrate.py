"""`jobrun migrate` as a user runs it: a subprocess, its exit code, stdout and stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def jobrun(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobrun", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_migrate_twice_on_an_empty_database_succeeds(empty_db_url: str) -> None:
    first = jobrun("migrate", "--database-url", empty_db_url)
    assert first.returncode == 0, first.stderr
    assert "applied" in first.stdout

    second = jobrun("migrate", "--database-url", empty_db_url)
    assert second.returncode == 0, second.stderr
    assert "up to date" in second.stdout


def test_status_prints_each_version_and_file(db_url: str) -> None:
    result = jobrun("migrate", "status", "--database-url", db_url)
    assert result.returncode == 0, result.stderr
    assert "00001_jobs.sql" in result.stdout
    assert "pending" not in result.stdout


def test_status_reads_the_url_from_the_environment(empty_db_url: str) -> None:
    result = jobrun("migrate", "status", env={"JOBRUN_DATABASE_URL": empty_db_url})
    assert result.returncode == 0, result.stderr
    assert "pending" in result.stdout


@pytest.mark.parametrize("command", [["migrate"], ["migrate", "status"]])
def test_unreachable_database_is_one_line_exit_2_without_password(command: list[str]) -> None:
    url = "postgresql://jobrun:t0p-s3cret@127.0.0.1:1/jobs"
    result = jobrun(*command, "--database-url", url)

    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot reach PostgreSQL at 127.0.0.1:1")
    assert "Traceback" not in result.stderr
    assert "t0p-s3cret" not in result.stderr
