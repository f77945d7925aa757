"""``detector migrate-from-sqlite`` on a representative generated laboratory.

The lab holds thousands of events from several nodes on many targets,
decisions already expired and still active, delivered snapshots and pending
work (events whose detection has not run). The migration copies it, verifies
counts, digests and expiries, refuses a second run, and the pending work then
runs on PostgreSQL to the same counts the lab would reach.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from detector.domain import EventIn
from detector.lab import LabDetector
from detector.migrate_lab import MigrationRefused, migrate_from_sqlite
from detector.port import Snapshot
from detector.postgres import PgDetector
from detector.service import accept
from detector.signing import Signer, generate_seed

T0 = 1_700_000_000_000
HOUR = 3_600_000


async def accept_all(_endpoint: str, _snapshot: Snapshot) -> int:
    return 200


async def build_lab(path: Path, signer: Signer) -> dict[str, object]:
    now = [T0]
    async with LabDetector(path, signer=signer, send=accept_all, clock=lambda: now[0]) as lab:
        await lab.add_agent("a1", "http://agent-1")
        await lab.add_agent("a2", "http://agent-2")
        n = 0
        for phase in range(2):  # decisions of phase 0 have expired by the end (v1 bans 10 min)
            now[0] = T0 + phase * 2 * HOUR
            for i in range(1500):
                address = f"10.{phase}.0.{i % 12}"
                event = EventIn(
                    request_id=f"req-{n}",
                    site=f"site-{i % 3}",
                    address=address,
                    rule_version="v1" if i % 5 else "v2",
                    occurred_ms=now[0] + i * 100,
                )
                await accept(lab, f"node-{i % 4}", event, now_ms=now[0] + i * 100)
                n += 1
            now[0] += 200_000
            await lab.process(within=60)
        for i in range(40):  # pending work: ingested, not yet detected
            event = EventIn(
                request_id=f"late-{i}",
                site="site-0",
                address="10.9.9.9",
                rule_version="v1",
                occurred_ms=now[0],
            )
            await accept(lab, "node-0", event, now_ms=now[0])
        return await lab.state()


@pytest.mark.slow
async def test_a_generated_lab_moves_verified_and_a_second_run_refuses(
    tmp_path: Path, detector_db: str
) -> None:
    signer = Signer(generate_seed())
    lab_path = tmp_path / "lab.db"
    lab_state = await build_lab(lab_path, signer)
    report = await migrate_from_sqlite(lab_path, detector_db)
    assert report.verified, report.summary()
    assert report.events == 3040 and report.jobs == 40
    assert report.decisions > 10 and report.snapshots > 0
    with pytest.raises(MigrationRefused, match="already holds detector events"):
        await migrate_from_sqlite(lab_path, detector_db)

    async with PgDetector(detector_db, signer=signer, send=accept_all, clock=lambda: T0) as pg:
        state = await pg.state()
        for part in ("events", "counters", "decisions", "intents", "snapshots", "snapshot_bodies"):
            assert state[part] == lab_state[part], part
        expiries = [d[5] for d in state["decisions"]]
        end = T0 + 2 * HOUR + 400_000
        assert any(x < end for x in expiries) and any(x > end for x in expiries)
        await pg.process(within=30)  # the pending lab work runs as jobrun jobs
        after = await pg.state()
    assert sum(after["counters"].values()) == 3040


def test_the_command_refuses_onto_a_non_empty_database(tmp_path: Path, detector_db: str) -> None:
    import asyncio

    signer = Signer(generate_seed())
    lab_path = tmp_path / "small.db"

    async def small() -> None:
        async with LabDetector(lab_path, signer=signer, clock=lambda: T0) as lab:
            event = EventIn(
                request_id="r", site="s", address="a", rule_version="v1", occurred_ms=T0
            )
            await accept(lab, "n", event, now_ms=T0)

    asyncio.run(small())
    cmd = [sys.executable, "-m", "detector", "migrate-from-sqlite", str(lab_path)]
    cmd += ["--database-url", detector_db]
    root = Path(__file__).resolve().parents[1]
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert first.returncode == 0, first.stderr
    assert "verified   yes" in first.stdout
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert second.returncode == 2
    assert second.stderr.startswith("error: the target database already holds detector events")
    forced = subprocess.run([*cmd, "--force"], capture_output=True, text=True, timeout=60, env=env)
    assert forced.returncode == 0, forced.stderr
    assert "events     0" in forced.stdout and "verified   yes" in forced.stdout
