"""A rolling deploy of periodic jobs declared in code: two versions as real worker processes.

``jobrun worker --app tests.acceptance.periodic_v1_app`` runs first and leads
the scheduler; ``periodic_v2_app`` (the next version: the report every second
with another payload and queue, one schedule gone, one new) starts beside it,
then the old worker stops, as a deploy replaces processes one at a time. The
schedules fire every second or two (6-field cron), so this watches real
seconds, never minutes, and waits on the database, never on a fixed sleep.

What must hold (the rule is jobrun.periodic's): no run of any schedule is
materialised twice, whichever process led and whichever definition was
current; the new definition wins as soon as its first worker starts, even
while the old code still leads, and never flips back while the old worker
keeps running; once the old worker is gone the new one leads and keeps it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import psycopg
from tests.acceptance import periodic_v2_app

from jobrun.testing import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
WITHIN = 60.0


@contextmanager
def worker(db_url: str, app: str, log: Path) -> Iterator[subprocess.Popen[str]]:
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "jobrun", "worker", "--app", f"tests.acceptance.{app}",
                "--database-url", db_url, "--queue", "default", "--scheduler",
                "--scheduler-tick", "100ms", "--periodic-renew", "200ms",
                "--log-format", "json",
            ],
            cwd=ROOT, stdout=out, stderr=out, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def runs(db_url: str) -> list[tuple[str, Any, Any, str, str]]:
    """Every scheduled job: its schedule's name, run time, payload, queue and key, by run time."""
    sql = (
        "SELECT s.name, j.run_at, j.payload, j.queue, j.idempotency_key FROM jobs j"
        " JOIN schedules s ON j.idempotency_key LIKE 'sched:' || s.id || ':%%'"
        " ORDER BY j.run_at, j.created_at"
    )
    with psycopg.connect(db_url) as conn:
        return [(r[0], r[1], r[2], r[3], r[4]) for r in conn.execute(sql)]


def reports(db_url: str, version: int) -> int:
    return sum(
        1
        for name, _, p, _, _ in runs(db_url)
        if name == "report.build" and p == {"version": version}
    )


def schedule(db_url: str, name: str) -> dict[str, Any]:
    with psycopg.connect(db_url) as conn:
        cur = conn.execute("SELECT * FROM schedules WHERE name = %s", (name,))
        columns = [c.name for c in cur.description or ()]
        row = cur.fetchone()
    return {} if row is None else dict(zip(columns, row, strict=True))


def test_a_rolling_deploy_fires_each_run_once_and_the_new_definition_wins(
    db_url: str, tmp_path: Path
) -> None:
    v2_digest = periodic_v2_app.registry.declared_schedules().digest  # type: ignore[union-attr]
    with ExitStack() as stack:
        old = stack.enter_context(worker(db_url, "periodic_v1_app", tmp_path / "old.log"))
        eventually_sync(lambda: reports(db_url, 1) >= 2, within=WITHIN, what="two v1 reports")

        # The new version starts beside the old one, which still leads.
        new = stack.enter_context(worker(db_url, "periodic_v2_app", tmp_path / "new.log"))
        eventually_sync(lambda: reports(db_url, 2) >= 3, within=WITHIN, what="three v2 reports")
        old_log = (tmp_path / "old.log").read_text()
        assert (
            f"version {v2_digest[:12]}: created v2-only; updated report.build; "
            "paused as removed from code v1-only"
        ) in old_log, old_log
        assert old.poll() is None and new.poll() is None  # both ran the whole time
        v2_while_both = reports(db_url, 2)

        # The deploy completes: the old worker stops, the new one takes over and keeps going.
        stop(old)
        eventually_sync(
            lambda: reports(db_url, 2) >= v2_while_both + 3,
            within=WITHIN,
            what="three more v2 reports after the old worker stopped",
        )
        assert "scheduler: leading" in (tmp_path / "new.log").read_text()
        stop(new)

    fired = runs(db_url)
    # No run of any schedule twice, across both versions, processes and queues.
    slots = [(name, run_at) for name, run_at, *_ in fired]
    assert len(slots) == len(set(slots)), sorted(s for s in slots if slots.count(s) > 1)
    keys = [key for *_, key in fired]
    assert len(keys) == len(set(keys))
    # Once the new definition fired, the old one never fired again.
    report_payloads = [p["version"] for name, _, p, _, _ in fired if name == "report.build"]
    first_v2 = report_payloads.index(2)
    assert set(report_payloads[:first_v2]) == {1}
    assert set(report_payloads[first_v2:]) == {2}
    assert {q for name, _, p, q, _ in fired if p == {"version": 2}} == {"periodic-v2"}

    report = schedule(db_url, "report.build")
    assert (report["cron"], report["payload"], report["queue"]) == (
        "* * * * * *",
        {"version": 2},
        "periodic-v2",
    )
    assert (report["origin"], report["paused"]) == ("code", False)
    gone = schedule(db_url, "v1-only")
    assert gone["paused"] and gone["removed_from_code_at"] is not None  # kept, not deleted
    assert all(
        run_at <= gone["removed_from_code_at"] for name, run_at, *_ in fired if name == "v1-only"
    )
    assert any(name == "v2-only" for name, *_ in fired)
