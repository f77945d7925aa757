"""``jobrun worker --processes N`` as users run it: a supervisor and N worker processes.

Every test drives the real command as a subprocess on a real database: jobs
spread over several pids, a SIGKILLed child is replaced by a new pid while
jobs keep flowing, SIGTERM to the supervisor stops every child gracefully and
exits 0, and a bad ``--processes`` is one ``error:`` line and exit 2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from jobrun.domain import NewJob
from jobrun.postgres import SyncStore, open_sync_pool

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.acceptance.processes_app"


@contextmanager
def supervisor(
    db_url: str, processes: int, *options: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jobrun", "worker", "--app", APP, "--database-url", db_url,
            "--processes", str(processes), "--concurrency", "2", "--poll", "100ms",
            "--shutdown-grace", "5s", "--log-level", "warning", *options,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )  # fmt: skip
    try:
        yield proc
    finally:
        # The children run in process groups of their own and hold the pipes
        # open: kill them before waiting for the supervisor's output, or a
        # failed test hangs in communicate() instead of reporting.
        children = seen_pids.pop(id(proc), set()) | children_of(proc.pid)
        if proc.poll() is None:
            proc.kill()
        for pid in children:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=30)


def children_of(parent: int) -> set[int]:
    """The pids whose parent is ``parent`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            # The fourth field of /proc/<pid>/stat, after the parenthesised name.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                found.add(int(entry.name))
    return found


seen_pids: dict[int, set[int]] = {}


def enqueue(db_url: str, out: Path, count: int) -> None:
    with open_sync_pool(db_url, max_size=1) as pool:
        SyncStore(pool).enqueue_batch(
            [NewJob(type="proc.record", payload={"out": str(out)}) for _ in range(count)]
        )


def records(out: Path) -> list[tuple[str, int]]:
    if not out.exists():
        return []
    return [(job, int(pid)) for job, pid in (line.split() for line in out.read_text().splitlines())]


def wait_for_records(out: Path, count: int, timeout: float = 60) -> list[tuple[str, int]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = records(out)
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{len(records(out))} of {count} jobs ran within {timeout}s")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_processes_share_the_jobs_restart_a_killed_child_and_stop_on_sigterm(
    db_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "records"
    with supervisor(db_url, 3) as proc:
        # The children come up one by one, and the first may drain a batch
        # before the others have connected: enqueue in rounds until jobs have
        # run in more than one of them.
        pids: set[int] = set()
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            # Counted before enqueueing: jobs of the new batch may run at once.
            before = len(records(out))
            enqueue(db_url, out, 20)
            first = wait_for_records(out, before + 20)
            pids = {pid for _, pid in first}
            seen_pids[id(proc)] = set(pids) | children_of(proc.pid)
        assert len({job for job, _ in first}) == len(first)
        assert len(pids) > 1, pids
        assert proc.pid not in pids

        # SIGKILL one child: the supervisor starts a new one, and jobs keep flowing.
        victim = min(pids)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        new_pids: set[int] = set()
        while not new_pids and time.monotonic() < deadline:
            before = len(records(out))
            enqueue(db_url, out, 30)
            done = wait_for_records(out, before + 30)
            new_pids = {pid for _, pid in done} - pids
            seen_pids[id(proc)] |= new_pids
        assert new_pids, "no new worker pid after a child was killed"
        assert victim not in {pid for _, pid in records(out)[len(first) :]}

        children = (pids - {victim}) | new_pids
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "restarting" in stderr, stderr
    assert not [pid for pid in children if alive(pid)]


def test_processes_zero_is_one_error_line_and_exit_2(db_url: str) -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "jobrun", "worker", "--app", APP,
            "--database-url", db_url, "--processes", "0",
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "--processes" in lines[0]


def test_sigterm_while_a_killed_child_waits_to_restart_stops_cleanly_with_status_0(
    db_url: str,
) -> None:
    # The stop comes inside the 0.5 s a slot waits before restarting its
    # killed child: nothing is left to stop there, no child is started any
    # more, and the crash already logged does not become the exit status.
    with supervisor(db_url, 2, "--log-level", "info") as proc:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while time.monotonic() < deadline:
            lines.append(proc.stderr.readline())
            if sum("started on queues" in line for line in lines) == 2:
                break
        assert sum("started on queues" in line for line in lines) == 2, lines
        (victim, *_) = sorted(children_of(proc.pid))
        seen_pids[id(proc)] = children_of(proc.pid)
        os.kill(victim, signal.SIGKILL)
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            if "restarting in" in line:
                break
        assert any("restarting in" in line for line in lines), lines
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    stderr = "".join(lines) + rest
    assert proc.returncode == 0, stderr
    assert "restart cancelled by the stop" in stderr, stderr
    # The two first children, and no restarted one.
    assert stderr.count(" started (pid ") == 2, stderr


def test_children_inherit_the_supervisors_resolved_settings(db_url: str, tmp_path: Path) -> None:
    # Settings reach the children as the parent resolved them, options and
    # variables alike: an option given to the supervisor (--job-timeout, which
    # the children's argv no longer spells out) wins over the variable beside
    # it, and JOBRUN_QUEUE in the parent's environment does not override --queue.
    out = tmp_path / "records"
    with open_sync_pool(db_url, max_size=1) as pool:
        store = SyncStore(pool)
        job = store.enqueue(
            NewJob(
                type="proc.record",
                queue="special",
                payload={"out": str(out), "sleep": 30},
                max_attempts=1,
            )
        )
        env = {"JOBRUN_QUEUE": "elsewhere", "JOBRUN_JOB_TIMEOUT": "1h"}
        options = ("--queue", "special", "--job-timeout", "300ms")
        with supervisor(db_url, 2, *options, env=env) as proc:
            wait_for_records(out, 1)
            seen_pids[id(proc)] = children_of(proc.pid)
            deadline = time.monotonic() + 60
            while store.get(job.id).state != "dead" and time.monotonic() < deadline:
                time.sleep(0.05)
        final = store.get(job.id)
    assert final.state == "dead", final
    assert final.last_error == "timed out: the attempt exceeded 0.3s", final.last_error
