"""Bad input to the ``jobrun`` command: one ``error:`` line, exit 2, nothing written.

Each case used to escape as a traceback (a raw psycopg error, OverflowError or
RecursionError). The commands run as subprocesses against a real database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


def jobrun(*args: str | bytes) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobrun", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "250"},
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def count_rows(db_url: str, table: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # test fixture SQL
    assert row is not None
    return int(row[0])


def nested_json(depth: int) -> str:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return json.dumps(value) if depth < 900 else '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


LONE_SURROGATE = '{"s": "\\ud800"}'
EVERY = ("--every", "1m")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        # item 6: lone surrogates and deep nesting in payloads
        (["enqueue", "t", "--payload", LONE_SURROGATE], "surrogate"),
        (
            ["schedules", "add", "s", "--type", "t", *EVERY, "--payload", LONE_SURROGATE],
            "surrogate",
        ),
        (["enqueue", "t", "--payload", nested_json(5000)], "nested more than 100 levels"),
        (["enqueue", "t", "--payload", nested_json(150)], "nested more than 100 levels"),
        (["enqueue", "t", "--payload", nested_json(300)], "100 levels"),
        (
            ["schedules", "add", "s", "--type", "t", *EVERY, "--payload", nested_json(5000)],
            "nested more than 100 levels",
        ),
        # item 7: durations beyond the limit
        (["enqueue", "t", "--delay", "9999999999d"], "at most 100 years"),
        (["enqueue", "t", "--delay", "3000000d"], "at most 100 years"),
        (["jobs", "purge", "--older-than", "99999999999d"], "at most 100 years"),
        (["schedules", "add", "s", "--type", "t", "--every", "9999999999d"], "at most 100 years"),
        (["worker", "--app", "tests.acceptance.cli_worker_app", "--lease", "9999999999d"], "lease"),
        # item 8: max attempts and priority bounded by the model
        (["enqueue", "t", "--max-attempts", "3000000000"], "max_attempts"),
        (["schedules", "add", "s", "--type", "t", *EVERY, "--max-attempts", "3000000000"], "10000"),
        (["schedules", "add", "s", "--type", "t", *EVERY, "--priority", "99999"], "32767"),
    ],
)
def test_bad_input_is_one_error_line_and_writes_nothing(
    db_url: str, args: list[str], needle: str
) -> None:
    line = one_line_error(jobrun(*args, "--database-url", db_url))
    assert needle in line
    assert count_rows(db_url, "jobs") == 0
    assert count_rows(db_url, "schedules") == 0


@pytest.mark.parametrize(
    "args",
    [
        [b"enqueue", b"t\xff"],
        [b"enqueue", b"t", b"--queue", b"q\xff"],
        [b"enqueue", b"t", b"--idempotency-key", b"k\xff"],
        [b"schedules", b"add", b"s\xff", b"--type", b"t", b"--every", b"1m"],
        [b"jobs", b"list", b"--queue", b"q\xff"],
    ],
)
def test_undecodable_arguments_are_one_error_line(db_url: str, args: list[bytes]) -> None:
    # Python hands undecodable argv bytes over as lone surrogates, which no
    # PostgreSQL text column can hold.
    line = one_line_error(jobrun(*args, b"--database-url", db_url.encode()))
    assert "unicode" in line.lower()
    assert count_rows(db_url, "jobs") == 0
    assert count_rows(db_url, "schedules") == 0


def test_backslash_u0000_text_in_a_payload_is_accepted(db_url: str) -> None:
    payload = '{"path": "C:\\\\u0000dir"}'  # the text C:\u0000dir, no NUL in it
    assert json.loads(payload) == {"path": "C:\\u0000dir"}
    result = jobrun("enqueue", "t", "--payload", payload, "--database-url", db_url)
    assert result.returncode == 0, result.stderr
    shown = jobrun("jobs", "show", result.stdout.strip(), "--database-url", db_url)
    assert "u0000dir" in shown.stdout
    added = jobrun(
        "schedules", "add", "p", "--type", "t", "--every", "1m", "--payload", payload,
        "--database-url", db_url,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr


def test_a_real_nul_in_a_payload_is_one_error_line(db_url: str) -> None:
    result = jobrun(
        "enqueue", "t", "--payload", '{"path": "C:\\u0000dir"}', "--database-url", db_url
    )
    assert "NUL" in one_line_error(result)
    assert count_rows(db_url, "jobs") == 0
