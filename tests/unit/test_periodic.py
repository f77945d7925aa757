"""Periodic jobs declared on the registry, and the pure rule that writes them (no database).

What the store does with them on a real server is tests/integration/test_periodic.py;
two code versions deployed side by side, tests/acceptance/test_periodic_rolling.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from jobrun import ConfigurationError, JobContext, Registry
from jobrun.domain import (
    DEFAULT_DECLARED_GROUP,
    DeclaredSet,
    NewSchedule,
    Schedule,
    declaration_digest,
    reconcile_declared,
)

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Report(BaseModel):
    kind: str


def registry_with_report(group: str | None = None) -> Registry:
    registry = Registry(periodic_group=group)

    @registry.periodic("0 3 * * *", payload={"kind": "nightly"})
    @registry.handler("report.build", payload=Report, queue="reports", priority=4)
    async def build(ctx: JobContext, payload: Report) -> None:
        return None

    return registry


def test_the_decorator_takes_the_handlers_type_and_its_declared_options() -> None:
    declared = registry_with_report().declared_schedules()
    assert declared is not None
    (schedule,) = declared.schedules
    assert (schedule.name, schedule.type, schedule.cron) == (
        "report.build",
        "report.build",
        "0 3 * * *",
    )
    assert (schedule.queue, schedule.priority, schedule.payload) == (
        "reports",
        4,
        {"kind": "nightly"},
    )
    assert schedule.max_attempts == NewSchedule(name="n", type="t", cron="* * * * *").max_attempts


def test_the_call_form_takes_the_handlers_options_whenever_the_handler_is_registered() -> None:
    registry = Registry()
    # Declared before its handler: the handler's options still apply.
    registry.periodic(type="ops.ping", every=90, name="ping", priority=1)

    @registry.handler("ops.ping", queue="ops", priority=7, max_attempts=2)
    async def ping(ctx: JobContext, payload: Any) -> None:
        return None

    declared = registry.declared_schedules()
    assert declared is not None
    (schedule,) = declared.schedules
    assert (schedule.name, schedule.every, schedule.cron) == ("ping", timedelta(seconds=90), None)
    assert (schedule.queue, schedule.priority, schedule.max_attempts) == ("ops", 1, 2)
    assert [p.name for p in registry.periodic_jobs] == ["ping"]


def test_a_model_payload_is_dumped_and_a_payload_the_handler_refuses_is_refused() -> None:
    registry = registry_with_report()
    registry.periodic(
        "0 4 * * *", type="report.build", name="weekly", payload=Report(kind="weekly")
    )
    declared = registry.declared_schedules()
    assert declared is not None
    assert {s.name: s.payload for s in declared.schedules}["weekly"] == {"kind": "weekly"}
    with pytest.raises(ConfigurationError, match="payload of periodic job 'bad' does not validate"):
        registry.periodic("0 5 * * *", type="report.build", name="bad", payload={"size": 1})
    assert "bad" not in {p.name for p in registry.periodic_jobs}


@pytest.mark.parametrize(
    ("args", "options", "needle"),
    [
        (("not a cron",), {}, "periodic job 't' is invalid: cron expression 'not a cron'"),
        (("0 0 31 2 *",), {}, "periodic job 't' is invalid"),
        (("* * * * *",), {"timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ((None,), {}, "give exactly one of cron and every"),
        (("* * * * *",), {"every": 5}, "give exactly one of cron and every"),
        ((None,), {"every": -1}, "every"),
        ((None,), {"every": 0.5}, "every must be at least 1s, not 500ms"),
        (("* * * * *",), {"queue": "a b"}, "queue name 'a b'"),
        (("* * * * *",), {"priority": 10**6}, "priority"),
        (("* * * * *",), {"name": ""}, "name"),
    ],
)
def test_a_bad_declaration_is_one_configuration_error_naming_it(
    args: tuple[Any, ...], options: dict[str, Any], needle: str
) -> None:
    registry = Registry()
    with pytest.raises(ConfigurationError) as caught:
        registry.periodic(*args, type="t", **options)
    assert needle in str(caught.value)
    assert "\n" not in str(caught.value)
    assert registry.periodic_jobs == ()


def test_a_name_is_declared_once() -> None:
    registry = Registry()
    registry.periodic("* * * * *", type="a")
    with pytest.raises(ConfigurationError, match="named 'a' is already declared"):
        registry.periodic("0 * * * *", type="b", name="a")


def test_the_decorator_needs_the_handler_beneath_it() -> None:
    registry = Registry()
    with pytest.raises(ConfigurationError, match=r"goes above @registry\.handler"):

        @registry.periodic("* * * * *")
        async def loose(ctx: JobContext, payload: Any) -> None:
            return None


def test_a_registry_without_declarations_takes_part_only_with_a_named_group() -> None:
    assert Registry().declared_schedules() is None
    named = Registry(periodic_group="billing").declared_schedules()
    assert named is not None
    assert (named.group, named.schedules) == ("billing", ())
    assert registry_with_report().periodic_group == DEFAULT_DECLARED_GROUP
    for bad in ("", "x" * 129, "nul\x00"):
        with pytest.raises(ConfigurationError, match="periodic_group"):
            Registry(periodic_group=bad)


def test_the_digest_names_the_content_not_the_order_of_declaration() -> None:
    a = NewSchedule(name="a", type="t", cron="* * * * *")
    b = NewSchedule(name="b", type="t", every=timedelta(minutes=5), payload={"x": [1, 2]})
    one = DeclaredSet("g", (a, b))
    assert DeclaredSet("g", (b, a)).digest == one.digest
    assert DeclaredSet.from_json("g", one.to_json()).digest == one.digest
    changed = b.model_copy(update={"payload": {"x": [2, 1]}})
    assert DeclaredSet("g", (a, changed)).digest != one.digest
    assert declaration_digest(changed) != declaration_digest(b)
    assert len(one.digest) == 64


def stored(schedule: NewSchedule, **fields: Any) -> Schedule:
    """A stored row for ``schedule``, declared by group g unless ``fields`` say otherwise."""
    values: dict[str, Any] = {
        **schedule.model_dump(),
        "id": 1,
        "next_run_at": NOW + timedelta(minutes=1),
        "last_run_at": NOW - timedelta(minutes=1),
        "paused": False,
        "created_at": NOW - timedelta(days=1),
        "updated_at": NOW - timedelta(days=1),
        "origin": "code",
        "declared_group": "g",
        "declared_digest": declaration_digest(schedule),
    }
    values.update(fields)
    return Schedule.model_validate(values)


def after(schedule: NewSchedule, at: datetime) -> datetime:
    """A stand-in next-run function: one hour after ``at``."""
    return at + timedelta(hours=1)


EVERY_MINUTE = NewSchedule(name="m", type="t", cron="* * * * *", payload={"v": 1})


def test_a_new_name_is_created_and_a_name_made_by_an_operator_is_left_alone() -> None:
    new = NewSchedule(name="new", type="t", cron="* * * * *")
    manual = stored(EVERY_MINUTE, origin="manual", declared_group=None, declared_digest=None)
    other = stored(EVERY_MINUTE.model_copy(update={"name": "o"}), declared_group="h")
    declared = DeclaredSet("g", (new, EVERY_MINUTE, EVERY_MINUTE.model_copy(update={"name": "o"})))
    plan = reconcile_declared(declared, [manual, other], NOW, after)
    ((write,),) = [plan.writes]
    assert (write.schedule.name, write.create, write.next_run_at) == (
        "new",
        True,
        NOW + timedelta(hours=1),
    )
    assert dict(plan.left_alone) == {
        "m": "made through the CLI or the dashboard",
        "o": "declared by group 'h'",
    }
    assert plan.removed == ()


def test_an_unchanged_schedule_is_not_written() -> None:
    plan = reconcile_declared(DeclaredSet("g", (EVERY_MINUTE,)), [stored(EVERY_MINUTE)], NOW, after)
    assert (plan.writes, plan.removed, plan.left_alone) == ((), (), ())


def test_a_changed_payload_keeps_the_next_run_and_the_operators_pause() -> None:
    row = stored(EVERY_MINUTE, paused=True)
    changed = EVERY_MINUTE.model_copy(update={"payload": {"v": 2}})
    (write,) = reconcile_declared(DeclaredSet("g", (changed,)), [row], NOW, after).writes
    assert (write.create, write.paused, write.next_run_at) == (False, True, row.next_run_at)
    assert write.digest == declaration_digest(changed)


def test_a_changed_trigger_runs_next_after_both_now_and_the_last_run() -> None:
    changed = EVERY_MINUTE.model_copy(update={"cron": "*/5 * * * *"})
    past = stored(EVERY_MINUTE, last_run_at=NOW - timedelta(minutes=3))
    (write,) = reconcile_declared(DeclaredSet("g", (changed,)), [past], NOW, after).writes
    assert write.next_run_at == NOW + timedelta(hours=1)
    # A last run later than now (clocks apart): counted from the last run.
    ahead = stored(EVERY_MINUTE, last_run_at=NOW + timedelta(minutes=10))
    (write,) = reconcile_declared(DeclaredSet("g", (changed,)), [ahead], NOW, after).writes
    assert write.next_run_at == NOW + timedelta(minutes=70)


def test_a_schedule_no_longer_declared_is_removed_and_declared_again_resumes() -> None:
    row = stored(EVERY_MINUTE)
    plan = reconcile_declared(DeclaredSet("g", ()), [row], NOW, after)
    assert (plan.writes, plan.removed) == ((), ("m",))
    removed = stored(EVERY_MINUTE, paused=True, removed_from_code_at=NOW - timedelta(days=2))
    assert reconcile_declared(DeclaredSet("g", ()), [removed], NOW, after).removed == ()
    (write,) = reconcile_declared(DeclaredSet("g", (EVERY_MINUTE,)), [removed], NOW, after).writes
    assert (write.create, write.paused, write.next_run_at) == (
        False,
        False,
        NOW + timedelta(hours=1),
    )
