"""Schedules edited and run now, queues drained and cleared: the store methods and the
dashboard's actions on a real PostgreSQL.

The dashboard and ``jobrun schedules add|edit`` read a schedule through one
reader (:mod:`jobrun.schedule_input`), so they refuse the same input with the
same reason, naming the field as each spells it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from jobrun import Client
from jobrun.domain import DeclaredSet, JobState, NewJob, NewSchedule, SchedulePatch
from jobrun.errors import ConfirmationNeeded, InvalidSchedule, ScheduleNotFound
from jobrun.schedule_input import new_schedule, schedule_patch
from jobrun.web import queue_actions, schedule_actions
from jobrun.web.bodies import Unconfirmed

ACTOR = "ops via web"


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[Client]:
    async with Client(database_url=db_url) as opened:
        yield opened


async def test_run_now_enqueues_one_job_and_leaves_the_regular_runs_alone(
    client: Client,
) -> None:
    store = client.store
    made = await store.create_schedule(
        NewSchedule(name="reports/eu", type="report", every=timedelta(hours=1), queue="r",
                    payload={"x": 1}, priority=3, max_attempts=4)
    )  # fmt: skip
    await store.create_schedule(NewSchedule(name="reports", type="r", every=timedelta(hours=1)))
    await store.pause_schedule("reports/eu")
    job = await store.run_schedule_now("reports/eu", actor=ACTOR)
    assert (job.queue, job.type, job.payload, job.priority, job.max_attempts) == (
        "r", "report", {"x": 1}, 3, 4,
    )  # fmt: skip
    assert job.state is JobState.QUEUED and job.run_at <= await store.now()
    again = await store.run_schedule_now("reports/eu")
    assert again.id != job.id  # each ask is one more job
    after = await store.get_schedule("reports/eu")
    assert after.next_run_at == made.next_run_at and after.last_run_at is None and after.paused
    [event] = await store.events(job.id)
    assert event.detail == f"run now of schedule reports/eu by {ACTOR}"
    assert len((await store.list_jobs(limit=10)).jobs) == 2  # "reports" made none
    with pytest.raises(ScheduleNotFound):
        await store.run_schedule_now("nope")


async def test_an_edit_records_its_actor_and_recomputes_only_a_changed_trigger(
    client: Client,
) -> None:
    store = client.store
    made = await store.create_schedule(NewSchedule(name="n", type="t", cron="0 3 * * *"))
    kept = await store.update_schedule("n", SchedulePatch(priority=5), actor=ACTOR)
    assert kept.next_run_at == made.next_run_at and kept.changed_by == ACTOR
    moved = await store.update_schedule("n", SchedulePatch(every=timedelta(minutes=1)))
    assert moved.cron is None and moved.next_run_at <= await store.now() + timedelta(minutes=1)
    assert moved.changed_by is None  # this change named nobody


async def test_a_schedule_declared_in_code_is_not_edited_but_can_be_run_paused_deleted(
    client: Client,
) -> None:
    store = client.store
    declared = DeclaredSet("app", (NewSchedule(name="tick", type="t", every=timedelta(hours=1)),))
    await store.renew_declarations(declared, timedelta(minutes=5))
    await store.apply_declarations("app", declared.digest)
    with pytest.raises(InvalidSchedule, match=r"declared in code \(group 'app'\): change"):
        await store.update_schedule("tick", SchedulePatch(priority=1), actor=ACTOR)
    assert (await store.get_schedule("tick")).priority == 0
    await store.run_schedule_now("tick")
    assert (await store.pause_schedule("tick")).paused
    with pytest.raises(Unconfirmed) as asked:
        await schedule_actions.delete_schedule(store, name="tick", confirm=None, actor=ACTOR)
    assert "declared in code (group 'app')" in asked.value.detail
    await schedule_actions.delete_schedule(store, name="tick", confirm="tick", actor=ACTOR)
    assert [s.name for s in await store.list_schedules()] == []


async def test_clear_deletes_only_that_queues_jobs_not_running_once_confirmed(
    client: Client,
) -> None:
    store = client.store
    for queue in ("billing/eu", "../x", "billing", "eu"):
        await store.enqueue(NewJob(type="t", queue=queue))
    later = await store.enqueue(NewJob(type="t", queue="billing/eu", delay=timedelta(hours=1)))
    running = await store.enqueue(NewJob(type="t", queue="billing/eu"))
    [claimed] = await store.claim(["billing/eu"], "w", 1, timedelta(minutes=1))
    assert claimed.id != later.id
    with pytest.raises(ConfirmationNeeded) as asked:
        await store.clear_queue("billing/eu", confirm=None)
    assert asked.value.count == 2  # one due, one scheduled for later; the leased one kept
    with pytest.raises(ConfirmationNeeded):
        await store.clear_queue("billing/eu", confirm=3)
    assert len((await store.list_jobs(limit=50)).jobs) == 6  # nothing deleted
    assert await store.clear_queue("billing/eu", confirm=2, actor=ACTOR) == 2
    left = {(j.queue, j.state) for j in (await store.list_jobs(limit=50)).jobs}
    assert left == {
        ("billing/eu", JobState.LEASED), ("../x", JobState.QUEUED),
        ("billing", JobState.QUEUED), ("eu", JobState.QUEUED),
    }  # fmt: skip
    assert running.id not in {j.id for j in (await store.list_jobs(limit=50)).jobs}
    assert await store.clear_queue("../x", confirm=1) == 1
    assert await store.clear_queue("empty", confirm=0) == 0


async def test_drain_pauses_and_says_how_many_still_run(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    store = client.store
    await store.enqueue(NewJob(type="t", queue="billing/eu"))
    await store.enqueue(NewJob(type="t", queue="billing/eu"))
    await store.claim(["billing/eu"], "w", 1, timedelta(minutes=1))
    with caplog.at_level(logging.INFO, logger="jobrun.web"):
        done = await queue_actions.drain_queue(store, name="billing/eu", actor=ACTOR)
    assert done["paused"] is True and done["drain"] == "draining: 1 running"
    assert f"queue 'billing/eu' drain (draining: 1 running) by {ACTOR}" in caplog.text
    assert not await store.claim(["billing/eu"], "w2", 5, timedelta(minutes=1))
    listed = {q.name: q for q in await store.list_queues()}
    assert not listed.get("billing") and listed["billing/eu"].changed_by == ACTOR
    done = await queue_actions.drain_queue(store, name="idle", actor=ACTOR)
    assert done["drain"] == "drained"


async def test_clear_action_asks_with_the_count_and_logs_what_it_deleted(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    store = client.store
    await store.enqueue(NewJob(type="t", queue="q&<b>"))
    with pytest.raises(Unconfirmed) as asked:
        await queue_actions.clear_queue(store, name="q&<b>", confirm=None, actor=ACTOR)
    assert asked.value.confirm == 1 and asked.value.status == 409
    with caplog.at_level(logging.INFO, logger="jobrun.web"):
        done = await queue_actions.clear_queue(store, name="q&<b>", confirm=1, actor=ACTOR)
    assert done == {"queue": "q&<b>", "deleted": 1}
    assert f"queue 'q&<b>' clear: 1 jobs deleted by {ACTOR}" in caplog.text


def test_the_cli_and_the_dashboard_read_a_schedule_alike() -> None:
    def option(field: str) -> str:
        return "--" + field.replace("_", "-")

    cases = [
        ({"type": "t"}, "give exactly one of {cron} and {every}"),
        ({"type": "t", "cron": "* * * * *", "every": "1m"}, "give exactly one of {cron}"),
        ({"type": "t", "every": "5"}, "{every}: invalid duration '5'"),
        ({"type": "t", "every": "1m", "payload": "["}, "{payload} is not valid JSON"),
        ({"type": "t", "every": "1m", "priority": "1.5"}, "{priority} must be a whole number"),
        ({"type": "t", "cron": "61 * * * *"}, "61"),
        ({"type": "t", "cron": "0 3 * * *", "timezone": "Mars/Base"}, "unknown time zone"),
        ({"type": "t", "every": "1m", "queue": "a,b"}, "','"),
        ({"type": "t", "every": "1m", "priority": "99999"}, "32767"),
        ({"type": "t", "every": "1m", "max_attempts": "0"}, "max_attempts"),
    ]
    for fields, needle in cases:
        for spell in (str, option):
            with pytest.raises(InvalidSchedule) as refused:
                new_schedule({"name": "s", **fields}, spell=spell)
            expected = needle.format(**{f: spell(f) for f in ("cron", "every", "payload",
                                                              "priority")})  # fmt: skip
            assert expected in str(refused.value), (fields, str(refused.value))
    made = new_schedule({"name": "s", "type": "t", "every": " 5m ", "payload": '{"a": [1]}',
                         "priority": "-2", "max_attempts": "", "cron": ""})  # fmt: skip
    assert (made.every, made.payload, made.priority, made.max_attempts) == (
        timedelta(minutes=5), {"a": [1]}, -2, 25,
    )  # fmt: skip
    with pytest.raises(InvalidSchedule, match="give cron or every, not both"):
        schedule_patch({"cron": "* * * * *", "every": "1m"})
    with pytest.raises(InvalidSchedule, match="give a field to change"):
        schedule_patch({"type": " ", "payload": ""})
    assert schedule_patch({"every": "2h"}).every == timedelta(hours=2)
    with pytest.raises(InvalidSchedule, match="cannot be renamed"):
        schedule_patch({"name": "other", "priority": "1"})
    with pytest.raises(InvalidSchedule, match="--payload cannot be changed to null"):
        schedule_patch({"payload": "null"}, spell=lambda f: "--" + f)


async def test_schedule_actions_log_their_actor_once_done(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    store = client.store
    with caplog.at_level(logging.INFO, logger="jobrun.web"):
        await schedule_actions.create_schedule(
            store, schedule=new_schedule({"name": "a&b", "type": "t", "every": "1h"}), actor=ACTOR
        )
        await schedule_actions.edit_schedule(
            store, name="a&b", patch=schedule_patch({"priority": "2", "every": "5m"}), actor=ACTOR
        )
        job = await schedule_actions.run_schedule_now(store, name="a&b", actor=ACTOR)
        with pytest.raises(Unconfirmed):
            await schedule_actions.delete_schedule(store, name="a&b", confirm="a", actor=ACTOR)
        await schedule_actions.delete_schedule(store, name="a&b", confirm="a&b", actor=ACTOR)
    assert caplog.messages == [
        f"schedule 'a&b' created by {ACTOR}",
        f"schedule 'a&b' edit of every, priority by {ACTOR}",
        f"schedule 'a&b' run now by {ACTOR}: job {job.id}",
        f"schedule 'a&b' deleted by {ACTOR}",
    ]
    with pytest.raises(ScheduleNotFound):
        await schedule_actions.delete_schedule(store, name="a&b", confirm=None, actor=ACTOR)
