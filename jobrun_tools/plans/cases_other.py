"""The cases of jobrun's query files other than jobs.sql (see :mod:`jobrun_tools.plans.cases`)."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from jobrun.postgres.migrate import MIGRATION_LOCK_KEY
from jobrun.sqlc import (
    effects,
    events,
    goose,
    locks,
    models,
    offers,
    queues,
    schedule_declarations,
    schedules,
    system,
    workers,
)
from jobrun_tools.plans.capture import recording
from jobrun_tools.plans.cases import Case, Facts

__all__ = ["cases"]


def cases(f: Facts) -> dict[str, list[Case]]:
    """The cases of every query of effects, events, goose, locks, offers, queues,
    schedule_declarations, schedules, system and workers.sql."""
    conn = recording()
    fact = f.jobs
    e = effects.Querier(conn)
    ev = events.Querier(conn)
    go = goose.Querier(conn)
    lk = locks.Querier(conn)
    of = offers.Querier(conn)
    qu = queues.Querier(conn)
    sc = schedules.Querier(conn)
    sd = schedule_declarations.Querier(conn)
    sy = system.Querier(conn)
    wk = workers.Querier(conn)
    new_ids = [UUID(int=UUID("01900000-0000-7000-8000-ffffffff0001").int + i) for i in range(100)]
    schedule = schedules.ScheduleInsertParams(
        name="schedule-new",
        type="send_digest",
        queue="digests",
        payload={"kind": "weekly"},
        priority=0,
        max_attempts=25,
        cron="0 8 * * 1",
        every=None,
        timezone="UTC",
        next_run_at=f.now + timedelta(days=1),
    )
    seen = workers.WorkerSeenParams(
        owner="worker-3:4242:ab12",
        host="worker-3",
        pid=4242,
        version="0.1.0",
        queues=["default", "emails"],
        concurrency=100,
        beat=timedelta(seconds=10),
        running=[],
        started_at=f.now,
    )
    return {
        "WorkerSeen": [
            Case("beat", "a worker's row written again", lambda g: wk.worker_seen(params=seen))
        ],
        "WorkerGone": [
            Case(
                "stop",
                "a worker's row deleted",
                lambda g: wk.worker_gone(owner="worker-3:4242:ab12"),
            )
        ],
        "WorkerList": [Case("all", "every worker row", lambda g: wk.worker_list())],
        "WorkerPrune": [
            Case(
                "stale",
                "rows not written for an hour",
                lambda g: wk.worker_prune(older_than=timedelta(hours=1)),
            )
        ],
        "EffectInsertMany": [
            Case(
                "batch",
                "the effects of 10 jobs just completed",
                lambda g: e.effect_insert_many(job_ids=fact.recent_succeeded),
            )
        ],
        "EffectKeyOf": [
            Case(
                "keyed",
                "a keyed job's key",
                lambda g: e.effect_key_of(
                    type="send_email",
                    queue="emails",
                    idempotency_key=fact.keyed_key,
                    id=fact.keyed_id,
                ),
            )
        ],
        "EffectExists": [
            Case(
                "keyed",
                "a keyed job's effect",
                lambda g: e.effect_exists(
                    type="send_email",
                    queue="emails",
                    idempotency_key=fact.keyed_key,
                    id=fact.keyed_id,
                ),
            )
        ],
        "EffectPrune": [
            Case(
                "retention",
                "ledger rows past 90 days, 1,000 at a time",
                lambda g: e.effect_prune(now=None, older_than=timedelta(days=90), batch_size=1000),
            )
        ],
        "TransactionSetStatementTimeout": [
            Case(
                "bound",
                "bound the transaction to 5 s",
                lambda g: e.transaction_set_statement_timeout(timeout="5s"),
            )
        ],
        "EventListByJob": [
            Case(
                "job",
                "a succeeded job's events",
                lambda g: ev.event_list_by_job(job_id=fact.succeeded_id),
            )
        ],
        "EventPrune": [
            Case(
                "retention",
                "events past 14 days, 1,000 at a time",
                lambda g: ev.event_prune(batch_size=1000, now=None, older_than=timedelta(days=14)),
            )
        ],
        "EventInsertEnqueuedMany": [
            Case(
                "batch",
                "the enqueued events of 100 jobs",
                lambda g: ev.event_insert_enqueued_many(job_ids=new_ids, at=f.now),
            )
        ],
        "EventInsertEnqueuedNow": [
            Case(
                "batch",
                "the enqueued events of 100 jobs, and the clock",
                lambda g: ev.event_insert_enqueued_now(job_ids=new_ids),
            )
        ],
        "GooseVersionList": [Case("all", "every version row", lambda g: go.goose_version_list())],
        "GooseVersionInsert": [
            Case(
                "next",
                "the next version",
                lambda g: go.goose_version_insert(version_id=12, is_applied=True),
            )
        ],
        "GooseLockTry": [
            Case(
                "try",
                "the migration lock",
                lambda g: go.goose_lock_try(lock_key=MIGRATION_LOCK_KEY),
            )
        ],
        "GooseLockRelease": [
            Case(
                "release",
                "the migration lock",
                lambda g: go.goose_lock_release(lock_key=MIGRATION_LOCK_KEY),
            )
        ],
        "GooseTableExists": [Case("probe", "goose's table", lambda g: go.goose_table_exists())],
        "AdvisoryLockTry": [Case("try", "a leader key", lambda g: lk.advisory_lock_try(key=42))],
        "AdvisoryXactLockTry": [
            Case("try", "a leader key", lambda g: lk.advisory_xact_lock_try(key=42))
        ],
        "AdvisoryUnlock": [Case("release", "a leader key", lambda g: lk.advisory_unlock(key=42))],
        "AdvisoryLockHeld": [
            Case("probe", "a leader key", lambda g: lk.advisory_lock_held(key=42))
        ],
        "KeyLockMany": [
            Case(
                "batch", "ten application keys", lambda g: lk.key_lock_many(ids=list(range(1, 11)))
            )
        ],
        "AdvisoryLockHeldAny": [
            Case("probe", "any advisory lock", lambda g: lk.advisory_lock_held_any())
        ],
        "WorkerOffersWithdraw": [
            Case(
                "owner",
                "a worker's offers",
                lambda g: of.worker_offers_withdraw(owner="worker-3:4242"),
            )
        ],
        "WorkerOffersList": [Case("all", "every offer", lambda g: of.worker_offers_list())],
        "QueueSetPaused": [
            Case(
                "pause",
                "pause the emails queue",
                lambda g: qu.queue_set_paused(name="emails", paused=True, actor="ops"),
            )
        ],
        "QueueSetLimits": [
            Case(
                "limits",
                "a concurrency limit for reports",
                lambda g: qu.queue_set_limits(
                    params=queues.QueueSetLimitsParams(
                        name="reports",
                        concurrency_limit=8,
                        rate_limit=None,
                        rate_interval=None,
                        actor="ops",
                        set_concurrency=True,
                        set_rate=False,
                        key_limit=None,
                        set_key_limit=False,
                    )
                ),
            )
        ],
        "QueueClearLimits": [
            Case(
                "clear",
                "the limits of reports",
                lambda g: qu.queue_clear_limits(actor="ops", name="reports"),
            )
        ],
        "QueueList": [Case("all", "every queue with its counts", lambda g: qu.queue_list())],
        "QueueClearableCount": [
            Case(
                "count",
                "the jobs a clear of emails would delete",
                lambda g: qu.queue_clearable_count(queue="emails"),
            )
        ],
        "QueueClearableIds": [
            Case(
                "batch",
                "a batch of the delayed digests a clear deletes",
                lambda g: qu.queue_clearable_ids(queue="digests", counted_at=f.now, batch_size=500),
            )
        ],
        "ScheduleInsert": [
            Case("new", "a new cron schedule", lambda g: sc.schedule_insert(params=schedule))
        ],
        "ScheduleGetByName": [
            Case("name", "one schedule", lambda g: sc.schedule_get_by_name(name="schedule-00007"))
        ],
        "ScheduleLockByName": [
            Case("name", "one schedule", lambda g: sc.schedule_lock_by_name(name="schedule-00007"))
        ],
        "ScheduleUpdate": [
            Case(
                "name",
                "one schedule, every field",
                lambda g: sc.schedule_update(
                    params=schedules.ScheduleUpdateParams(
                        type=schedule.type,
                        queue=schedule.queue,
                        payload=schedule.payload,
                        priority=0,
                        max_attempts=25,
                        cron=schedule.cron,
                        every=None,
                        timezone="UTC",
                        next_run_at=schedule.next_run_at,
                        name="schedule-00007",
                        actor="ops",
                    )
                ),
            )
        ],
        "ScheduleRunNow": [
            Case(
                "name",
                "one job of a schedule, now",
                lambda g: sc.schedule_run_now(
                    params=schedules.ScheduleRunNowParams(
                        name="schedule-00007",
                        id=new_ids[0],
                        backoff_kind=models.BackoffKind.EXPONENTIAL,
                        backoff_base=timedelta(seconds=1),
                        backoff_max=timedelta(hours=1),
                        actor="ops",
                    )
                ),
            )
        ],
        "ScheduleSetPaused": [
            Case(
                "pause",
                "pause one schedule",
                lambda g: sc.schedule_set_paused(
                    paused=True, next_run_at=None, actor="ops", name="schedule-00007"
                ),
            )
        ],
        "ScheduleDelete": [
            Case("name", "one schedule", lambda g: sc.schedule_delete(name="schedule-00007"))
        ],
        "ScheduleDeclarationsRenew": [
            Case(
                "renew",
                "a worker renews its group's declared version",
                lambda g: sd.schedule_declarations_renew(
                    params=schedule_declarations.ScheduleDeclarationsRenewParams(
                        declared_group="default",
                        digest="d" * 64,
                        declarations=[{"name": "nightly", "type": "send_digest"}],
                        now=None,
                        live_for=timedelta(seconds=30),
                    )
                ),
            )
        ],
        "ScheduleDeclarationsCurrent": [
            Case(
                "live",
                "the live versions of every group",
                lambda g: sd.schedule_declarations_current(now=None),
            )
        ],
        "ScheduleDeclarationsGet": [
            Case(
                "one",
                "one group's version",
                lambda g: sd.schedule_declarations_get(declared_group="default", digest="d" * 64),
            )
        ],
        "ScheduleLockForDeclarations": [
            Case(
                "group",
                "a group's schedules and the names it declares",
                lambda g: sc.schedule_lock_for_declarations(
                    declared_group="default", names=["nightly", "schedule-00007"]
                ),
            )
        ],
        "ScheduleInsertDeclared": [
            Case(
                "new",
                "a schedule declared in code",
                lambda g: sc.schedule_insert_declared(
                    params=schedules.ScheduleInsertDeclaredParams(
                        name="nightly",
                        type=schedule.type,
                        queue=schedule.queue,
                        payload=schedule.payload,
                        priority=0,
                        max_attempts=25,
                        cron=schedule.cron,
                        every=None,
                        timezone="UTC",
                        next_run_at=schedule.next_run_at,
                        declared_group="default",
                        declared_digest="d" * 64,
                    )
                ),
            )
        ],
        "ScheduleUpdateDeclared": [
            Case(
                "name",
                "a declared schedule changed in code",
                lambda g: sc.schedule_update_declared(
                    params=schedules.ScheduleUpdateDeclaredParams(
                        type=schedule.type,
                        queue=schedule.queue,
                        payload=schedule.payload,
                        priority=0,
                        max_attempts=25,
                        cron=schedule.cron,
                        every=None,
                        timezone="UTC",
                        next_run_at=schedule.next_run_at,
                        paused=False,
                        declared_digest="d" * 64,
                        name="nightly",
                        declared_group="default",
                    )
                ),
            )
        ],
        "ScheduleRetireDeclared": [
            Case(
                "removed",
                "a group's schedules its code no longer declares",
                lambda g: sc.schedule_retire_declared(
                    now=None, actor="jobrun", names=["nightly"], declared_group="default"
                ),
            )
        ],
        "ScheduleList": [Case("all", "every schedule", lambda g: sc.schedule_list())],
        "SchedulePage": [
            Case(
                "first", "the first 101", lambda g: sc.schedule_page(after=None, max_schedules=101)
            ),
            Case(
                "next",
                "the 101 after a name",
                lambda g: sc.schedule_page(after="schedule-00500", max_schedules=101),
            ),
        ],
        "ScheduleLockDue": [
            Case(
                "due",
                "the due schedules, up to 100",
                lambda g: sc.schedule_lock_due(now=None, max_schedules=100),
            )
        ],
        "ScheduleAdvance": [
            Case(
                "id",
                "one schedule fired",
                lambda g: sc.schedule_advance(
                    next_run_at=f.now + timedelta(minutes=5), last_run_at=f.now, id=7
                ),
            )
        ],
        "DatabaseNow": [Case("now", "the clock", lambda g: sy.database_now())],
        "ReplicaLag": [Case("primary", "asked of a primary", lambda g: sy.replica_lag())],
        "TablesOutgrowingStatistics": [
            Case("all", "jobrun's growing tables", lambda g: sy.tables_outgrowing_statistics())
        ],
    }
