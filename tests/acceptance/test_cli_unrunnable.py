"""Jobs no worker can run, through the ``jobrun`` command (issue 27, item 10).

``jobrun enqueue --app`` refuses an unregistered type, naming the types that
exist, and a payload the handler's model refuses; nothing is stored. A
``jobrun worker`` given such a job anyway (by a producer it does not share a
registry with) retries it on the bounded policy set by ``JOBRUN_UNRUNNABLE_*``
and ends it dead with the cause, one log line per attempt. Before, enqueue
accepted both and the worker retried them 25 times over about 13 hours.
"""

from __future__ import annotations

import signal

from tests.acceptance.test_cli import count_rows, jobrun, ok, one_line_error
from tests.acceptance.test_cli_worker import job_row, worker

from jobrun.testing import eventually_sync

APP = "tests.acceptance.cli_worker_app"


def test_enqueue_with_the_app_refuses_an_unknown_type_naming_the_registered_ones(
    db_url: str,
) -> None:
    result = jobrun("enqueue", "cli.gret", "--app", APP, "--database-url", db_url)
    error = one_line_error(result)
    assert "job type 'cli.gret' is not registered" in error, error
    assert "registered types: 'cli.echo', 'cli.gc_threshold', 'cli.greet'" in error, error
    bad = jobrun(
        "enqueue", "cli.greet", "--payload", '{"nom": "ada"}', "--app", APP,
        "--database-url", db_url,
    )  # fmt: skip
    assert "does not match Greeting" in one_line_error(bad)
    assert count_rows(db_url, "jobs") == 0
    # What the application registers goes in, validated by the same model.
    ok(
        "enqueue",
        "cli.greet",
        "--payload",
        '{"name": "ada"}',
        "--app",
        APP,
        "--database-url",
        db_url,
    )
    # Without --app, enqueue knows no registry and checks nothing more than before.
    ok("enqueue", "cli.gret", "--database-url", db_url)
    assert count_rows(db_url, "jobs") == 2


def test_a_worker_retries_an_unknown_type_on_the_bounded_policy_then_it_is_dead(
    db_url: str,
) -> None:
    job_id = ok("enqueue", "elsewhere.only", "--database-url", db_url).strip()
    policy = {"JOBRUN_UNRUNNABLE_ATTEMPTS": "2", "JOBRUN_UNRUNNABLE_RETRY": "300ms"}
    options = ("--poll", "100ms", "--log-format", "text")
    with worker(db_url, *options, env=policy) as proc:

        def dead() -> bool:
            assert proc.poll() is None
            return job_row(db_url, job_id)[0] == "dead"

        eventually_sync(dead, what="the job dead")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    state, _, attempts = job_row(db_url, job_id)
    assert (state, attempts) == ("dead", 2)  # the policy's 2, not the job's 25
    cause = "no handler is registered for job type 'elsewhere.only'"
    assert cause in ok("jobs", "show", job_id, "--database-url", db_url)  # its last error
    lines = [line for line in stderr.splitlines() if job_id in line and "failed:" in line]
    assert len(lines) == 2, stderr
    assert "failed:queued" in lines[0] and "failed:dead" in lines[1], lines
    assert all(cause in line for line in lines), lines
    assert "1 dead" in stderr
