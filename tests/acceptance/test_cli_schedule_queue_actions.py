"""``jobrun schedules edit|run-now`` and ``jobrun queues drain|clear`` as a subprocess."""

from __future__ import annotations

import asyncio
import getpass
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from tests.acceptance.test_cli import ROOT, jobrun, ok, one_line_error

from jobrun import Client
from jobrun.domain import DeclaredSet, NewJob, NewSchedule, WorkerReport
from jobrun.testing import eventually_sync


def with_client(db_url: str, body: Any) -> Any:
    async def run() -> Any:
        async with Client(database_url=db_url) as client:
            return await body(client)

    return asyncio.run(run())


def test_schedules_edit_and_run_now(db_url: str) -> None:
    url = ("--database-url", db_url)
    ok("schedules", "add", "reports/eu", "--type", "t", "--cron", "0 3 * * *", *url)
    before = with_client(db_url, lambda c: c.store.get_schedule("reports/eu"))
    out = ok("schedules", "edit", "reports/eu", "--priority", "4", "--payload", '{"a": 1}', *url)
    assert "schedule 'reports/eu' changed (cron 0 3 * * *)" in out
    kept = with_client(db_url, lambda c: c.store.get_schedule("reports/eu"))
    assert (kept.priority, kept.payload, kept.next_run_at) == (4, {"a": 1}, before.next_run_at)
    assert "every 5m" in ok("schedules", "edit", "reports/eu", "--every", "5m", *url)
    for args, needle in [
        (["--cron", "* * * * *", "--every", "1m"], "give --cron or --every, not both"),
        (["--every", "5"], "--every: invalid duration '5'"),
        (["--every", "10ms"], "every must be at least 1s, not 10ms"),
        (["--payload", "["], "--payload is not valid JSON"),
        (["--timezone", "Mars/Base"], "unknown time zone 'Mars/Base'"),
        ([], "give a field to change"),
    ]:
        assert needle in one_line_error(jobrun("schedules", "edit", "reports/eu", *args, *url))
    missing = jobrun("schedules", "edit", "x", "--priority", "1", *url)
    assert "does not exist" in one_line_error(missing)
    out = ok("schedules", "run-now", "reports/eu", *url)
    assert "schedule 'reports/eu' ran now: job" in out
    jobs = with_client(db_url, lambda c: c.store.list_jobs(limit=5)).jobs
    assert [(j.type, j.payload) for j in jobs] == [("t", {"a": 1})]
    assert "does not exist" in one_line_error(jobrun("schedules", "run-now", "gone", *url))


def test_schedules_edit_refuses_a_schedule_declared_in_code(db_url: str) -> None:
    async def declare(client: Client) -> None:
        tick = NewSchedule(name="tick", type="t", every=timedelta(hours=1))
        declared = DeclaredSet("app", (tick,))
        await client.store.renew_declarations(declared, timedelta(minutes=5))
        await client.store.apply_declarations("app", declared.digest)

    with_client(db_url, declare)
    edit = jobrun("schedules", "edit", "tick", "--priority", "1", "--database-url", db_url)
    assert "declared in code (group 'app')" in one_line_error(edit)


def test_queues_drain_and_clear_touch_only_the_named_queue(db_url: str) -> None:
    async def setup(client: Client) -> None:
        for queue in ("billing/eu", "billing/eu", "../x", "billing"):
            await client.store.enqueue(NewJob(type="t", queue=queue))
        await client.store.claim(["billing/eu"], "w", 1, timedelta(minutes=1))

    with_client(db_url, setup)
    url = ("--database-url", db_url)
    drained = ok("queues", "drain", "billing/eu", *url)
    assert "queue 'billing/eu' paused; draining: 1 running" in drained
    assert "queue '../x' paused; drained" in ok("queues", "drain", "../x", *url)
    asked = one_line_error(jobrun("queues", "clear", "billing/eu", *url))
    assert "has 1 job not running: nothing was deleted" in asked and "--confirm 1" in asked
    wrong = jobrun("queues", "clear", "billing/eu", "--confirm", "2", *url)
    assert "nothing was deleted" in one_line_error(wrong)
    assert "cleared: 1 job deleted" in ok("queues", "clear", "billing/eu", "--confirm", "1", *url)
    assert "','" in one_line_error(jobrun("queues", "clear", "a,b", "--confirm", "0", *url))
    listed = {q.name: q for q in with_client(db_url, lambda c: c.store.list_queues())}
    assert (listed["billing/eu"].queued, listed["billing/eu"].leased) == (0, 1)
    assert listed["../x"].queued == 1 and listed["billing"].queued == 1
    assert listed["../x"].paused and not listed["billing"].paused


def test_queues_drain_wait_returns_once_the_last_running_job_finished(db_url: str) -> None:
    async def setup(client: Client) -> Any:
        await client.store.enqueue(NewJob(type="t", queue="mail"))
        [job] = await client.store.claim(["mail"], "w", 1, timedelta(minutes=5))
        return job

    job = with_client(db_url, setup)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobrun", "queues", "drain", "mail", "--wait",
         "--database-url", db_url],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "queue 'mail' draining: 1 running"
        assert proc.poll() is None  # still waiting on the running job
        with_client(db_url, lambda c: c.store.complete(job, "w"))
        eventually_sync(lambda: proc.poll() is not None, what="drain --wait returned")
        rest = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == 0
    assert rest.strip().splitlines()[-1] == "queue 'mail' paused; drained"


def test_a_control_on_a_queue_nothing_uses_is_noted(db_url: str) -> None:
    async def setup(client: Client) -> None:
        await client.store.enqueue(NewJob(type="t", queue="emails"))
        started = datetime.now(UTC)
        await client.store.worker_seen(
            WorkerReport(
                owner="h:1:ab", host="h", pid=1, version="test", queues=("reports/eu",),
                concurrency=1, beat=timedelta(minutes=1), started_at=started,
            )
        )  # fmt: skip

    with_client(db_url, setup)
    url = ("--database-url", db_url)
    typo = jobrun("queues", "pause", "emials", *url)
    assert typo.returncode == 0 and "queue 'emials' paused" in typo.stdout
    assert typo.stderr.strip() == (
        "note: no job waits or runs in queue 'emials', no control is set on it"
        " and no worker serves it; did you mean 'emails'?"
    )
    # Once paused, the name holds a control: lifting it draws no note.
    resumed = jobrun("queues", "resume", "emials", *url)
    assert resumed.returncode == 0 and resumed.stderr == ""
    limited = jobrun("queues", "limit", "new/queue", "--concurrency", "2", *url)
    assert limited.returncode == 0 and limited.stderr.startswith("note: no job waits or runs")
    assert "did you mean" not in limited.stderr  # nothing in use is close to it
    drained = jobrun("queues", "drain", "nowhere", *url)
    assert drained.returncode == 0 and "no worker serves it" in drained.stderr
    # A queue with jobs, or one a live worker serves, draws no note.
    for queue in ("emails", "reports/eu"):
        paused = jobrun("queues", "pause", queue, *url)
        assert paused.returncode == 0 and paused.stderr == "", paused.stderr


def test_queue_controls_from_the_cli_record_who_ran_them(db_url: str) -> None:
    url = ("--database-url", db_url)
    who = f"{getpass.getuser()}@{socket.gethostname()} via cli"
    ok("queues", "pause", "mail", *url)
    [mail] = with_client(db_url, lambda c: c.store.list_queues())
    assert mail.changed_by == who
    with_client(db_url, lambda c: c.store.resume_queue("mail", actor="ops via web"))
    ok("queues", "limit", "mail", "--concurrency", "2", *url)
    [mail] = with_client(db_url, lambda c: c.store.list_queues())
    assert (mail.changed_by, mail.concurrency_limit) == (who, 2)


def test_job_and_schedule_actions_from_the_cli_record_who_ran_them(db_url: str) -> None:
    url = ("--database-url", db_url)
    who = f"{getpass.getuser()}@{socket.gethostname()} via cli"
    job_id = ok("enqueue", "t", "--delay", "1h", *url).strip()
    ok("jobs", "run-now", job_id, *url)
    ok("jobs", "cancel", job_id, *url)
    ok("jobs", "retry", job_id, *url)
    events = with_client(db_url, lambda c: c.store.events(UUID(job_id)))
    details = {e.kind: e.detail for e in events if e.kind in ("run_now", "cancelled", "retried")}
    assert len(details) == 3, [(e.kind, e.detail) for e in events]
    assert all(detail is not None and f"by {who}" in detail for detail in details.values())
    ok("schedules", "add", "nightly", "--type", "t", "--cron", "0 3 * * *", *url)
    ok("schedules", "pause", "nightly", *url)
    paused = with_client(db_url, lambda c: c.store.get_schedule("nightly"))
    assert paused.changed_by == who
    with_client(db_url, lambda c: c.store.resume_schedule("nightly", actor="ops via web"))
    ok("schedules", "edit", "nightly", "--priority", "2", *url)
    edited = with_client(db_url, lambda c: c.store.get_schedule("nightly"))
    assert edited.changed_by == who


def test_a_schedule_with_a_blank_name_or_type_is_refused_naming_it(db_url: str) -> None:
    url = ("--database-url", db_url)
    for args, message in (
        (["s", "--type", "", "--every", "5m"], "error: --type must not be blank"),
        (["  ", "--type", "t", "--every", "5m"], "error: NAME must not be blank"),
    ):
        assert one_line_error(jobrun("schedules", "add", *args, *url)) == message
    assert with_client(db_url, lambda c: c.store.list_schedules()) == []


def test_the_type_a_schedule_makes_does_not_filter_the_jobs_listing(db_url: str) -> None:
    url = ("--database-url", db_url)
    job_id = ok("enqueue", "mail.send", *url).strip()
    # Exported for `schedules add`, JOBRUN_TYPE leaves `jobs list` whole.
    assert job_id in ok("jobs", "list", *url, env={"JOBRUN_TYPE": "report.build"})
    assert job_id not in ok("jobs", "list", *url, env={"JOBRUN_LIST_TYPE": "report.build"})
    assert job_id in ok("jobs", "list", *url, env={"JOBRUN_LIST_TYPE": "mail.send"})


def test_jobs_purge_deletes_finished_jobs_and_says_how_many(db_url: str) -> None:
    url = ("--database-url", db_url)
    kept = ok("enqueue", "t", *url).strip()
    finished = ok("enqueue", "t", *url).strip()
    ok("jobs", "cancel", finished, *url)
    assert ok("jobs", "purge", "--older-than", "1d", *url).strip() == (
        "purged 0 jobs finished more than 1d ago"
    )
    assert ok("jobs", "purge", "--older-than", "0s", *url).strip() == (
        "purged 1 job finished more than 0s ago"
    )
    listed = ok("jobs", "list", *url)
    assert kept in listed and finished not in listed
