"""Periodic jobs declared in code, written into the schedules by the store, on a real server.

The clock is pinned: versions are renewed, written and fired at chosen
database times (``now=``), so a change of a five-minute cron is tested
without waiting five minutes. The rule itself is jobrun.periodic's; two
code versions deployed side by side as processes are
tests/acceptance/test_periodic_rolling.py.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobrun import Client, JobContext, Registry
from jobrun.domain import REMOVED_FROM_CODE, DeclaredSet, NewSchedule
from jobrun.postgres import Pool
from jobrun.testing import eventually

store_module = pytest.importorskip("jobrun.postgres.store")
Store = store_module.Store

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2031, 1, 1, 0, 0, tzinfo=UTC)
LIVE = timedelta(hours=1)
GROUP = "default"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def report(cron: str = "*/5 * * * *", version: int = 1, **fields: Any) -> NewSchedule:
    return NewSchedule(
        name="report", type="report.build", cron=cron, payload={"v": version}, **fields
    )


PING = NewSchedule(name="ping", type="ops.ping", every=timedelta(minutes=1), queue="ops")


async def deploy(store: Any, declared: DeclaredSet, minutes: float) -> Any:
    """A worker of this version starts at T0 + ``minutes``; the leader writes what is current."""
    await store.renew_declarations(declared, LIVE, now=at(minutes))
    current = await store.current_declarations(now=at(minutes))
    return await store.apply_declarations(GROUP, current[GROUP], now=at(minutes))


def fired(db_url: str) -> list[tuple[str, datetime, Any, str]]:
    """Every scheduled job: its schedule's name, run time, payload and key, by run time."""
    sql = (
        "SELECT s.name, j.run_at, j.payload, j.idempotency_key FROM jobs j"
        " JOIN schedules s ON j.idempotency_key LIKE 'sched:' || s.id || ':%%'"
        " ORDER BY j.run_at, s.name"
    )
    with psycopg.connect(db_url) as conn:
        return [(r[0], r[1], r[2], r[3]) for r in conn.execute(sql)]


async def test_a_version_is_created_then_changed_in_place_and_fires_each_slot_once(
    db_url: str, pool: Pool
) -> None:
    store = Store(pool)
    first = await deploy(store, DeclaredSet(GROUP, (report(), PING)), 0)
    assert sorted(w.schedule.name for w in first.writes if w.create) == ["ping", "report"]
    created = await store.get_schedule("report")
    assert (created.origin, created.declared_group, created.next_run_at) == ("code", GROUP, at(5))
    await store.due_schedules(at(5))

    # The next version: another cron and another payload, a minute later.
    v2 = DeclaredSet(GROUP, (report("*/10 * * * *", 2), PING))
    second = await deploy(store, v2, 6)
    assert [(w.schedule.name, w.create) for w in second.writes] == [("report", False)]
    changed = await store.get_schedule("report")
    assert changed.id == created.id
    assert (changed.cron, changed.payload, changed.next_run_at) == (
        "*/10 * * * *",
        {"v": 2},
        at(10),
    )
    await store.due_schedules(at(10))
    await store.due_schedules(at(10))  # a second leader's tick at the same time

    runs = [(name, run_at, payload) for name, run_at, payload, _ in fired(db_url)]
    assert [r for r in runs if r[0] == "report"] == [
        ("report", at(5), {"v": 1}),
        ("report", at(10), {"v": 2}),
    ]
    keys = [key for *_, key in fired(db_url)]
    assert len(keys) == len(set(keys))
    assert all(
        key.startswith(f"sched:{created.id}:")
        for name, _, _, key in fired(db_url)
        if name == "report"
    )


async def test_a_changed_trigger_never_fires_a_slot_already_fired(db_url: str, pool: Pool) -> None:
    store = Store(pool)
    await deploy(store, DeclaredSet(GROUP, (report("*/5 * * * *"),)), 0)
    await store.due_schedules(at(5))
    # Back and forth between two crons whose slots coincide, the clock barely moving:
    # the slot at 00:05 has fired and must not come due again under either.
    # Each in a queue of its own, where the key of a run already fired is free.
    await deploy(store, DeclaredSet(GROUP, (report("*/1 * * * *", 2, queue="q2"),)), 4.5)
    await deploy(store, DeclaredSet(GROUP, (report("*/5 * * * *", 3, queue="q3"),)), 4.6)
    schedule = await store.get_schedule("report")
    assert schedule.next_run_at == at(10)
    await store.due_schedules(at(10))
    assert [run_at for _, run_at, _, _ in fired(db_url)] == [at(5), at(10)]


async def test_a_schedule_no_longer_declared_is_paused_not_deleted_and_comes_back(
    db_url: str, pool: Pool
) -> None:
    store = Store(pool)
    await deploy(store, DeclaredSet(GROUP, (report(), PING)), 0)
    removed = await deploy(store, DeclaredSet(GROUP, (report(),)), 1)
    assert (removed.writes, removed.removed) == ((), ("ping",))
    ping = await store.get_schedule("ping")
    assert ping.paused
    assert ping.removed_from_code_at == at(1)
    assert ping.changed_by == REMOVED_FROM_CODE
    await store.due_schedules(at(30))
    assert {name for name, *_ in fired(db_url)} == {"report"}

    # Declared again, by a version of its own (the first one, still live, is not the newest).
    ping_again = PING.model_copy(update={"payload": {"again": True}})
    back = await deploy(store, DeclaredSet(GROUP, (report(), ping_again)), 40)
    assert [(w.schedule.name, w.create) for w in back.writes] == [("ping", False)]
    resumed = await store.get_schedule("ping")
    assert resumed.id == ping.id
    assert (resumed.paused, resumed.removed_from_code_at) == (False, None)
    assert resumed.payload == {"again": True}
    assert resumed.next_run_at == at(41)  # its next slot: the missed ones are not caught up


async def test_an_operators_pause_of_a_declared_schedule_survives_a_change(
    db_url: str, pool: Pool
) -> None:
    store = Store(pool)
    await deploy(store, DeclaredSet(GROUP, (report(),)), 0)
    await store.pause_schedule("report", actor="ops")
    await deploy(store, DeclaredSet(GROUP, (report(version=2),)), 1)
    schedule = await store.get_schedule("report")
    assert (schedule.paused, schedule.payload, schedule.changed_by) == (True, {"v": 2}, "ops")


def cli(db_url: str, *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobrun", *args, "--database-url", db_url],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


async def test_a_schedule_made_through_the_cli_is_never_touched(db_url: str, pool: Pool) -> None:
    cli(db_url, "schedules", "add", "report", "--type", "mine", "--cron", "0 1 * * *")
    cli(db_url, "schedules", "add", "cleanup", "--type", "ops.clean", "--every", "1h")
    cli(db_url, "schedules", "pause", "cleanup")
    store = Store(pool)
    before = {s.name: s for s in await store.list_schedules()}
    assert {s.origin for s in before.values()} == {"manual"}

    # A version declaring a schedule of the same name, and later one declaring nothing.
    first = await deploy(store, DeclaredSet(GROUP, (report(), PING)), 0)
    assert first.left_alone == (("report", "made through the CLI or the dashboard"),)
    assert [w.schedule.name for w in first.writes] == ["ping"]
    emptied = await deploy(store, DeclaredSet(GROUP, ()), 1)
    assert emptied.removed == ("ping",)

    after = {s.name: s for s in await store.list_schedules()}
    assert {name: after[name] for name in before} == before
    assert (after["ping"].origin, after["ping"].paused) == ("code", True)


async def test_the_current_version_is_the_newest_live_one(pool: Pool) -> None:
    store = Store(pool)
    old = DeclaredSet(GROUP, (report(),))
    new = DeclaredSet(GROUP, (report(version=2),))
    assert await store.renew_declarations(old, LIVE, now=at(0)) == at(0)
    assert await store.renew_declarations(new, LIVE, now=at(1)) == at(1)
    # An old worker renewing (or restarting) while the old version is live: no takeover.
    assert await store.renew_declarations(old, LIVE, now=at(2)) == at(0)
    assert await store.current_declarations(now=at(2)) == {GROUP: new.digest}
    # Every new worker stopped: the new version lapses and the old one is current.
    assert await store.current_declarations(now=at(62)) == {GROUP: old.digest}
    # A rollback started after the old version lapsed too: it appears anew.
    assert await store.current_declarations(now=at(200)) == {}
    assert await store.renew_declarations(old, LIVE, now=at(200)) == at(200)
    assert await store.current_declarations(now=at(200)) == {GROUP: old.digest}
    # Other groups are their own.
    other = DeclaredSet("billing", ())
    await store.renew_declarations(other, LIVE, now=at(201))
    assert await store.current_declarations(now=at(201)) == {
        GROUP: old.digest,
        "billing": other.digest,
    }
    assert await store.apply_declarations(GROUP, "0" * 64) is None


async def test_a_worker_records_its_version_and_the_leader_fires_it(db_url: str) -> None:
    registry = Registry()

    @registry.periodic(every=timedelta(seconds=1), payload={"from": "code"})
    @registry.handler("ops.tick", queue="ticks")
    async def tick(ctx: JobContext, payload: Any) -> None:
        return None

    async with Client(
        registry,
        database_url=db_url,
        scheduler=True,
        scheduler_tick=timedelta(milliseconds=100),
        periodic_renew=timedelta(milliseconds=200),
        queues=["other"],  # its jobs stay queued, to be counted
    ) as client:
        stop = asyncio.Event()
        running = asyncio.create_task(client.run_worker(stop=stop))
        try:

            async def ticks() -> list[tuple[str, datetime, Any, str]] | None:
                runs = [r for r in fired(db_url) if r[0] == "ops.tick"]
                return runs if len(runs) >= 2 else None

            await eventually(ticks, what="two runs of the declared schedule")
        finally:
            stop.set()
            await running
        schedule = await client.store.get_schedule("ops.tick")
    assert (schedule.origin, schedule.queue, schedule.every) == (
        "code",
        "ticks",
        timedelta(seconds=1),
    )
    assert {payload["from"] for _, _, payload, _ in fired(db_url)} == {"code"}
