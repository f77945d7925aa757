"""``scripts/detector-demo`` end to end, and the agents' checks it relies on."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from detector.demo import AgentServer
from detector.domain import EventIn, snapshot_bytes
from detector.postgres import PgDetector, now_ms
from detector.signing import Signer, generate_seed

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_demo_runs_on_a_fresh_database_and_every_check_holds(empty_pg: str) -> None:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("JOBRUN_DATABASE_URL", None)
    done = subprocess.run(
        [str(ROOT / "scripts" / "detector-demo"), "--database-url", empty_pg],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only; the demo gives itself 50 s to drain
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "all checks held" in out
    rows = {
        cells[0]: cells[1:]
        for line in out.splitlines()
        if line.count("│") == 5
        for cells in [[c.strip() for c in line.strip("│ ").split("│")]]
    }
    assert len(rows) == 13, out
    assert all(verdict == "ok" for _, _, verdict in rows.values()), out
    for name in ("signature failures", "revision-order violations", "unexpected HTTP answers"):
        assert rows[name][:2] == ["0", "0"], out
    for name in ("duplicates rejected (replays: 200, no new job)", "bad signatures rejected (401)"):
        assert int(rows[name][0]) > 0, out
    assert int(rows["decisions"][0]) == 5
    assert rows["agents holding every decision in force"] == ["3", "3", "ok"]


def test_the_demo_refuses_a_database_that_already_holds_detector_events(
    detector_db: str,
) -> None:
    async def seed_one() -> None:
        async with PgDetector(detector_db, signer=Signer(generate_seed())) as app:
            event = EventIn(
                request_id="r", site="s", address="a", rule_version="v1", occurred_ms=now_ms()
            )
            await app.ingest("n", event, now_ms=now_ms())

    asyncio.run(seed_one())
    env = {**os.environ, "PYTHONPATH": str(ROOT / "examples" / "detector")}
    done = subprocess.run(
        [sys.executable, "-m", "detector", "demo", "--database-url", detector_db],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "error: the demo needs a database without detector events" in done.stderr


async def test_an_agent_counts_bad_signatures_and_revisions_out_of_order() -> None:
    signer = Signer(generate_seed())
    agent = AgentServer("agent-0", signer.public_key)
    transport = httpx.ASGITransport(app=agent.app())

    async def post(revision: int, *, decisions: int = 0, forged: bool = False) -> int:
        body = snapshot_bytes("agent-0", revision, 1, [{"n": n} for n in range(decisions)])
        key = Signer(generate_seed()) if forged else signer
        headers = {
            "x-revision": str(revision),
            "x-signature": base64.b64encode(key.sign(body)).decode(),
        }
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
            response = await client.post("/snapshots", content=body, headers=headers)
        return response.status_code

    assert await post(1, decisions=1) == 200
    assert await post(2, decisions=2, forged=True) == 400
    assert await post(2, decisions=2) == 200
    assert await post(2, decisions=2) == 200  # an identical resend: a redelivery
    assert await post(1, decisions=1) == 409  # older than what it holds
    assert await post(2, decisions=3) == 409  # revision 2 reused with other bytes
    assert (agent.accepted, agent.resends) == (2, 1)
    assert (agent.signature_failures, agent.order_violations) == (1, 2)
    assert agent.latest == 2 and len(agent.decisions) == 2
