"""Operator-facing failures of the ``jobrun`` command, run as a user runs it: subprocesses.

Any jobrun error must be one ``error: ...`` line on stderr and exit code 2,
never a traceback; help texts must say what the code does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def jobrun(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobrun", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "250"},
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_enqueue_help_says_lower_priority_runs_first() -> None:
    result = jobrun("enqueue", "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Lower runs first" in text, result.stdout
    assert "Higher runs first" not in text


# -- a database that was never migrated ---------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["stats"],
        ["enqueue", "mail.send", "--payload", '{"to": "a@example.com"}'],
        ["jobs", "list"],
        ["schedules", "list"],
        ["schedules", "add", "nightly", "--type", "t", "--every", "5m"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_commands_on_a_never_migrated_database_say_run_migrate(
    empty_db_url: str, args: list[str]
) -> None:
    line = one_line_error(jobrun(*args, "--database-url", empty_db_url))
    assert "schema is missing" in line
    assert "jobrun migrate" in line


def test_worker_on_a_never_migrated_database_fails_at_start(empty_db_url: str) -> None:
    started = time.monotonic()
    result = jobrun(
        "worker", "--app", "tests.acceptance.cli_worker_app", "--database-url", empty_db_url,
        "--poll", "200ms", "--scheduler",
        timeout=30,
    )  # fmt: skip
    line = one_line_error(result)
    assert "schema is missing" in line and "jobrun migrate" in line
    assert time.monotonic() - started < 15


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--lease", "1s", "--heartbeat-every", "2s"],
            "heartbeat_every (2s) must be at most a third of the lease (1s)",
        ),
        (
            ["--retention-effects", "1h", "--retention-succeeded", "1d12h"],
            "retention_effects (1h) must be at least retention_succeeded (1d12h)",
        ),
    ],
)
def test_worker_settings_errors_show_durations_as_typed(
    db_url: str, options: list[str], message: str
) -> None:
    # Python's own form of a timedelta (0:00:02, 1 day, 12:00:00) is not what users type.
    app = ("--app", "tests.acceptance.cli_worker_app")
    refused = jobrun("worker", "--database-url", db_url, *app, *options)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert message in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


@pytest.mark.parametrize(
    ("args", "variables", "message"),
    [
        (
            ["enqueue", "t", "--priority", "99999"],
            {},
            "error: invalid job: priority must be at most 32767, not 99999",
        ),
        (
            ["enqueue", "t", "--queue", ""],
            {},
            "error: invalid job: queue must not be empty",
        ),
        (
            ["worker", "--app", "tests.acceptance.cli_worker_app"],
            {"JOBRUN_CONCURRENCY": "0"},
            "error: JOBRUN_CONCURRENCY must be at least 1, not '0'",
        ),
        (
            ["worker", "--app", "tests.acceptance.cli_worker_app", "--concurrency", "many"],
            {},
            "error: --concurrency must be a whole number, not 'many'",
        ),
    ],
)
def test_refused_input_names_the_field_the_rule_and_the_value(
    db_url: str, args: list[str], variables: dict[str, str], message: str
) -> None:
    # pydantic's wording ("Input should be less than or equal to 32767") said
    # the rule but not the value given, in words of its own.
    refused = subprocess.run(
        [sys.executable, "-m", "jobrun", *args, "--database-url", db_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "250", **variables},
    )
    assert one_line_error(refused) == message
