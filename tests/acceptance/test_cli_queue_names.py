"""Queue names at the command line: the worker's list, enqueue's one queue, and the name rule.

``JOBRUN_QUEUE`` is the worker's list of queues (``mail,default``). It used
to double as ``jobrun enqueue --queue``, so with the worker's environment
loaded an enqueue wrote its job into a queue literally named
``mail,default``. Enqueue (and ``schedules add``, and ``jobs list``'s filter)
now have variables of their own, and no entry point accepts a queue name
that could be read as a list.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import psycopg
import pytest
from tests.acceptance.test_cli import count_rows, jobrun, ok, one_line_error
from tests.acceptance.test_cli_worker import wait_for_line, wait_for_trace, worker


def queues_of_jobs(db_url: str) -> list[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT queue FROM jobs ORDER BY id").fetchall()  # test fixture SQL
    return [row[0] for row in rows]


def test_enqueue_does_not_read_the_workers_queue_list(db_url: str) -> None:
    env = {"JOBRUN_DATABASE_URL": db_url, "JOBRUN_QUEUE": "mail,default"}
    ok("enqueue", "report.build", env=env)
    assert queues_of_jobs(db_url) == ["default"]
    # Its own variable, and the option, still choose the queue.
    ok("enqueue", "report.build", env={**env, "JOBRUN_ENQUEUE_QUEUE": "mail"})
    ok("enqueue", "report.build", "--queue", "reports", env=env)
    assert queues_of_jobs(db_url) == ["default", "mail", "reports"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["enqueue", "t", "--queue", "mail,default"], "must not contain ','"),
        (["enqueue", "t", "--queue", "mail default"], "must not contain whitespace"),
        (["enqueue", "t", "--queue", " mail"], "must not contain whitespace"),
        (["enqueue", "t", "--queue", "mail\u200b"], "control or format character"),
        (["enqueue", "t", "--queue", ".."], "must not be '..'"),
        (["queues", "pause", "mail,default"], "must not contain ','"),
        (["queues", "limit", "a,b", "--concurrency", "2"], "must not contain ','"),
        (
            ["schedules", "add", "s", "--type", "t", "--every", "1m", "--queue", "a,b"],
            "must not contain ','",
        ),
        # A schedule is named in the dashboard's URLs too: a browser removes
        # "." and ".." segments, so its buttons could never reach it.
        (["schedules", "add", "..", "--type", "t", "--every", "1m"], "must not be '..'"),
        (["schedules", "add", ".", "--type", "t", "--every", "1m"], "must not be '.'"),
        (["schedules", "add", "ctl\x01", "--type", "t", "--every", "1m"], "control or format"),
    ],
)
def test_a_queue_name_that_reads_as_a_list_is_refused_everywhere(
    db_url: str, args: list[str], needle: str
) -> None:
    line = one_line_error(jobrun(*args, "--database-url", db_url))
    assert needle in line, line
    for table in ("jobs", "queues", "schedules"):
        assert count_rows(db_url, table) == 0


def test_schedules_add_and_jobs_list_do_not_read_the_workers_queue_list(db_url: str) -> None:
    env = {"JOBRUN_DATABASE_URL": db_url, "JOBRUN_QUEUE": "mail,default"}
    ok("schedules", "add", "nightly", "--type", "t", "--every", "1h", env=env)
    assert "default" in ok("schedules", "list", env=env)
    job_id = ok("enqueue", "t", env=env).strip()
    assert job_id in ok("jobs", "list", env=env)
    assert job_id not in ok("jobs", "list", env={**env, "JOBRUN_LIST_QUEUE": "mail"})


def test_the_worker_reads_its_queue_variable_as_a_list(db_url: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    for queue in ("mail", "default"):
        ok(
            "enqueue", "mark", "--queue", queue, "--payload", json.dumps({"trace": str(trace)}),
            "--database-url", db_url,
        )  # fmt: skip
    with worker(db_url, "--poll", "100ms", env={"JOBRUN_QUEUE": "mail,default"}) as proc:
        wait_for_line(proc, "started on queues")
        # Both queues' jobs run: the worker did not read one queue named "mail,default".
        assert len(wait_for_trace(trace, 2, timeout=30)) == 2
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
