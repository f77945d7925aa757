"""The ``jobrun`` command as a user runs it: subprocesses against a real database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from uuid import UUID

import psycopg
import pytest

from jobrun.testing import eventually_sync

ROOT = Path(__file__).resolve().parents[2]


def jobrun(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobrun", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    result = jobrun(*args, env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


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


def test_enqueue_list_show_cancel_retry(db_url: str) -> None:
    out = ok(
        "enqueue", "mail.send", "--payload", '{"to": "a@example.com"}',
        "--queue", "mail", "--priority", "5", "--database-url", db_url,
    )  # fmt: skip
    job_id = UUID(out.strip())

    listed = ok("jobs", "list", "--database-url", db_url)
    assert str(job_id) in listed
    assert "mail.send" in listed and "queued" in listed
    assert str(job_id) in ok("jobs", "list", "--queue", "mail", "--database-url", db_url)
    assert str(job_id) not in ok("jobs", "list", "--queue", "other", "--database-url", db_url)
    assert str(job_id) not in ok("jobs", "list", "--state", "dead", "--database-url", db_url)

    shown = ok("jobs", "show", str(job_id), "--database-url", db_url)
    assert "a@example.com" in shown
    assert "enqueued" in shown

    assert "cancelled" in ok("jobs", "cancel", str(job_id), "--database-url", db_url)
    assert str(job_id) in ok("jobs", "list", "--state", "cancelled", "--database-url", db_url)

    assert "queued" in ok("jobs", "retry", str(job_id), "--database-url", db_url)
    events = ok("events", str(job_id), "--database-url", db_url)
    for kind in ("enqueued", "cancelled", "retried"):
        assert kind in events, events


def test_enqueue_replay_returns_the_stored_job(db_url: str) -> None:
    args = ("enqueue", "report.build", "--payload", '{"day": 1}', "--idempotency-key", "k1")
    first = jobrun(*args, "--database-url", db_url)
    second = jobrun(*args, "--database-url", db_url)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert first.stdout.strip() == second.stdout.strip()
    assert "replayed existing job" not in first.stderr
    assert "replayed existing job" in second.stderr
    assert count_rows(db_url, "jobs") == 1

    conflict = jobrun(
        "enqueue", "report.build", "--payload", '{"day": 2}', "--idempotency-key", "k1",
        "--database-url", db_url,
    )  # fmt: skip
    assert "idempotency key" in one_line_error(conflict)


def test_jobs_list_shows_whole_ids_in_a_narrow_terminal(db_url: str) -> None:
    # Ids made within a minute share their first characters (a UUIDv7 starts with
    # its timestamp): a cut id would name all of them at once.
    ids = [ok("enqueue", "report.build", "--database-url", db_url).strip() for _ in range(3)]
    listed = ok("jobs", "list", "--database-url", db_url, env={"COLUMNS": "80"})
    for job_id in ids:
        assert job_id in listed, listed


def test_options_read_the_environment(db_url: str) -> None:
    job_id = ok(
        "enqueue",
        "env.job",
        env={
            "JOBRUN_DATABASE_URL": db_url,
            "JOBRUN_ENQUEUE_QUEUE": "from-env",
            "JOBRUN_PRIORITY": "3",
        },
    ).strip()
    for queue, shown in (("from-env", True), ("other", False)):
        env = {"JOBRUN_DATABASE_URL": db_url, "JOBRUN_LIST_QUEUE": queue}
        assert (job_id in ok("jobs", "list", env=env)) is shown


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["enqueue", "t", "--payload", "{not json"], "not valid JSON"),
        (["enqueue", "t", "--delay", "soon"], "invalid duration"),
        (["enqueue", "t", "--priority", "99999"], "priority"),
        (["jobs", "list", "--state", "sleeping"], "unknown state 'sleeping'"),
        (["jobs", "show", "not-a-uuid"], "is not a job id"),
        (["jobs", "cancel", "0190e7a1-0000-7000-8000-000000000000"], "does not exist"),
        (["jobs", "retry", "0190e7a1-0000-7000-8000-000000000000"], "does not exist"),
        (["events", "0190e7a1-0000-7000-8000-000000000000"], "does not exist"),
        (["jobs", "purge", "--older-than", "forever"], "invalid duration"),
        (["schedules", "add", "s", "--type", "t", "--cron", "61 * * * *"], ""),
        (["schedules", "add", "s", "--type", "t", "--every", "5"], "invalid duration"),
        (["schedules", "add", "s", "--type", "t"], "exactly one of --cron and --every"),
        (["schedules", "add", "s", "--type", "t", "--every", "1m", "--payload", "["], "JSON"),
        (["schedules", "pause", "nope"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    db_url: str, args: list[str], needle: str
) -> None:
    line = one_line_error(jobrun(*args, "--database-url", db_url))
    assert needle in line
    assert count_rows(db_url, "jobs") == 0
    assert count_rows(db_url, "schedules") == 0


def test_bad_cron_names_the_expression(db_url: str) -> None:
    result = jobrun(
        "schedules", "add", "nightly", "--type", "t", "--cron", "not a cron",
        "--database-url", db_url,
    )  # fmt: skip
    assert "cron" in one_line_error(result).lower()


@pytest.mark.parametrize(
    "command",
    [
        ["enqueue", "t"],
        ["jobs", "list"],
        ["stats"],
        ["schedules", "list"],
        ["worker", "--app", "tests.acceptance.cli_worker_app"],
    ],
)
def test_unreachable_database_is_one_line_without_password(command: list[str]) -> None:
    result = jobrun(*command, "--database-url", "postgresql://u:s3cret@127.0.0.1:1/x")
    line = one_line_error(result)
    assert "127.0.0.1:1" in line
    assert "s3cret" not in result.stderr + result.stdout


def test_schedules_add_list_pause_resume_remove(db_url: str) -> None:
    url = ("--database-url", db_url)
    assert "created" in ok(
        "schedules", "add", "nightly", "--type", "report.build", "--cron", "30 2 * * *",
        "--timezone", "Europe/Berlin", "--payload", '{"kind": "daily"}', *url,
    )  # fmt: skip
    assert "every 5m" in ok(
        "schedules", "add", "ping", "--type", "ping", "--every", "5m", "--queue", "ops", *url
    )
    listed = ok("schedules", "list", *url)
    assert "nightly" in listed and "cron 30 2 * * *" in listed and "Europe/Berlin" in listed
    assert "ping" in listed and "every 5m" in listed

    assert "paused" in ok("schedules", "pause", "nightly", *url)
    assert "paused" in ok("schedules", "list", *url)
    assert "resumed" in ok("schedules", "resume", "nightly", *url)
    assert "paused" not in ok("schedules", "list", *url)
    assert "removed" in ok("schedules", "remove", "ping", *url)
    assert "ping" not in ok("schedules", "list", *url)

    duplicate = jobrun("schedules", "add", "nightly", "--type", "t", "--every", "1h", *url)
    assert "already exists" in one_line_error(duplicate)


def test_stats_counts_per_queue_and_state(db_url: str) -> None:
    for queue in ("alpha", "alpha", "beta"):
        ok("enqueue", "t", "--queue", queue, "--database-url", db_url)
    stats = ok("stats", "--database-url", db_url)
    rows = {line.split("│")[1].strip(): line for line in stats.splitlines() if "│" in line}
    assert "alpha" in rows and "beta" in rows
    alpha_cells = [c.strip() for c in rows["alpha"].split("│")[1:-1]]
    assert alpha_cells[1] == "2"  # queued
    assert alpha_cells[-1].endswith(("ms", "s"))  # oldest queued age


def test_worker_processes_a_job_and_stops_on_sigterm(db_url: str) -> None:
    job_id = ok("enqueue", "cli.echo", "--payload", '{"n": 1}', "--database-url", db_url).strip()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jobrun", "worker", "--app", "tests.acceptance.cli_worker_app",
            "--database-url", db_url, "--concurrency", "2", "--poll", "200ms",
            "--scheduler", "--log-format", "json",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        eventually_sync(
            lambda: "succeeded" in ok("jobs", "show", job_id, "--database-url", db_url),
            what="the job succeeded",
        )
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert '"message": "worker' in stderr and "stopped" in stderr
    assert "Traceback" not in stderr


def test_worker_with_a_missing_app_is_one_line(db_url: str) -> None:
    result = jobrun("worker", "--app", "no_such_module_here", "--database-url", db_url)
    assert "cannot import app module" in one_line_error(result)


def test_demo_runs_and_effects_match(db_url: str) -> None:
    started = time.monotonic()
    result = jobrun("demo", "--database-url", db_url, "--jobs", "60", timeout=90)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert time.monotonic() - started < 60
    out = result.stdout
    assert "summary" in out
    assert "as it is" in out

    def value(label: str) -> str:
        line = next(line for line in out.splitlines() if label in line)
        return line.split("│")[2].strip()

    assert value("effect rows written") == value("succeeded jobs with an effect")
    assert int(value("effect rows written")) > 0
    assert value("effects match") == "yes"
    assert int(value("jobs dead")) >= 1
    assert int(value("jobs cancelled")) == 1
    assert int(value("jobs queued")) == 0 and int(value("jobs leased")) == 0


def test_usage_errors_are_one_line_and_exit_2(db_url: str) -> None:
    bad_priority = jobrun("enqueue", "t", "--priority", "abc", "--database-url", db_url)
    assert "priority" in one_line_error(bad_priority)
    missing = jobrun("enqueue", "--database-url", db_url)
    assert "TYPE" in one_line_error(missing)
    assert count_rows(db_url, "jobs") == 0


def test_queues_pause_limit_list_resume_unlimit(db_url: str) -> None:
    ok("enqueue", "mail.send", "--queue", "mail", "--database-url", db_url)
    assert "queue 'mail' paused" in ok("queues", "pause", "mail", "--database-url", db_url)
    out = ok(
        "queues", "limit", "mail", "--concurrency", "5", "--rate", "10/m",
        "--database-url", db_url,
    )  # fmt: skip
    assert "concurrency 5, rate 10/1m" in out
    # A limit given alone leaves the other as it was.
    out = ok("queues", "limit", "mail", "--rate", "100/1s", "--database-url", db_url)
    assert "concurrency 5, rate 100/1s" in out

    listed = ok("queues", "list", "--database-url", db_url)
    row = next(line for line in listed.splitlines() if " mail " in line)
    assert row.split("│")[2:7] == [" paused ", "           5 ", " 100/1s ", "      1 ", "      0 "]

    ok("queues", "resume", "mail", "--database-url", db_url)
    assert "has no limits" in ok("queues", "unlimit", "mail", "--database-url", db_url)
    row = next(line for line in ok("queues", "list", "--database-url", db_url).splitlines()
               if " mail " in line)  # fmt: skip
    assert " active " in row and "100/1s" not in row


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("limit", "q"), "give --concurrency, --rate or both"),
        (("limit", "q", "--rate", "10"), "--rate: invalid rate '10'"),
        (("limit", "q", "--rate", "10/fortnight"), "--rate: invalid duration"),
        (("limit", "q", "--rate", "0/1s"), "rate count must be between 1"),
        (("limit", "q", "--rate", "-1/1s"), "rate count must be between 1 and 2147483647, got -1"),
        (("limit", "q", "--rate", "5/0s"), "rate interval must be positive"),
        (("limit", "q", "--concurrency", "0"), "concurrency limit must be between 1"),
        (("limit", "q", "--concurrency", "abc"), "--concurrency"),
        (("pause", ""), "queue name must not be empty"),
        (("resume", "x" * 129), "at most 128 characters"),
        (("unlimit",), "Missing argument"),
    ],
)
def test_queues_bad_input_is_one_error_line_and_writes_nothing(
    db_url: str, args: tuple[str, ...], message: str
) -> None:
    line = one_line_error(jobrun("queues", *args, "--database-url", db_url))
    assert message in line, line
    assert count_rows(db_url, "queues") == 0
