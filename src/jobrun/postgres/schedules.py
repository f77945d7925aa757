"""The Schedules half of the Store: cron and interval job templates.

A schedule stores its next run time. ``due_schedules`` runs in its own short
transaction: it locks the due rows with SKIP LOCKED (so an overlapping second
leader takes none of them), materialises each due run as a job whose
idempotency key is ``sched:<id>:<next_run>`` (the durable guard: even two
leaders racing on the same row could only produce one job per run), and
advances ``next_run_at``.

Misfire policy: after downtime a schedule fires once for all the runs it
missed (the oldest missed run time is the job's key), and its next run is the
first one after *now*, not a storm of catch-ups.

Periodic jobs declared in code: ``renew_declarations`` records that a process
runs a version of a group's declarations, ``current_declarations`` names each
group's newest live version, and ``apply_declarations`` writes one version
into the schedules in one transaction, as :func:`~jobrun.domain.reconcile_declared`
decides (the rule is :mod:`jobrun.periodic`'s).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import psycopg
from pydantic import ValidationError

from jobrun.cron import next_fire, next_interval, validate_cron, validate_timezone
from jobrun.domain import (
    DEFAULT_BACKOFF,
    REMOVED_FROM_CODE,
    DeclaredSet,
    DeclaredWrite,
    Job,
    NewSchedule,
    Reconciliation,
    Schedule,
    SchedulePatch,
    declared_edit_problem,
    new_job_id,
    reconcile_declared,
)
from jobrun.errors import InvalidSchedule, ScheduleNotFound
from jobrun.postgres._base import bounded_actor
from jobrun.postgres.convert import (
    dump_dt,
    encode_payload,
    job_from_row,
    normal_json,
    schedule_from_row,
    utc,
)
from jobrun.postgres.store_core import StoreCore
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import models
from jobrun.sqlc import schedule_declarations as declaration_queries
from jobrun.sqlc import schedules as schedule_queries
from jobrun.sqlc import system as system_queries

__all__ = ["ScheduleMethods", "schedule_job_key"]

log = logging.getLogger("jobrun.schedules")

_DUE_BATCH = 100


def schedule_job_key(schedule_id: int, run_at: datetime) -> str:
    """The idempotency key of the job materialised for one run of a schedule."""
    return f"sched:{schedule_id}:{dump_dt(run_at)}"


def _check_trigger(cron: str | None, timezone: str) -> None:
    if cron is not None:
        validate_cron(cron, timezone)
    else:
        # An interval schedule still carries a zone; refuse a bad one early.
        validate_timezone(timezone)


def _next_run(
    cron: str | None, every: Any, timezone: str, anchor: datetime, after: datetime
) -> datetime:
    if cron is not None:
        return next_fire(cron, timezone, after)
    return next_interval(every, anchor, after)


class ScheduleMethods(StoreCore):
    """Mixed into :class:`jobrun.postgres.store.Store`; uses its transaction helpers."""

    async def create_schedule(self, schedule: NewSchedule) -> Schedule:
        """Store a new schedule; its first run is the first fire time after database now."""
        _check_trigger(schedule.cron, schedule.timezone)
        payload = normal_json(
            encode_payload(schedule.type, schedule.payload, self.max_payload_bytes)
        )
        async with self._with_tx() as tx:
            now = await _db_now(tx)
            first = _next_run(schedule.cron, schedule.every, schedule.timezone, now, now)
            queries = schedule_queries.AsyncQuerier(tx)
            # The insert itself refuses a taken name (ON CONFLICT DO NOTHING): a
            # lookup first would let concurrent creates both pass it.
            row = await queries.schedule_insert(
                params=schedule_queries.ScheduleInsertParams(
                    **_schedule_columns(schedule, payload, first)
                )
            )
        if row is None:
            raise InvalidSchedule(f"a schedule named {schedule.name!r} already exists")
        return schedule_from_row(row)

    async def get_schedule(self, name: str) -> Schedule:
        """One schedule by name; ScheduleNotFound when there is none."""
        async with self._connection() as conn:
            row = await schedule_queries.AsyncQuerier(conn).schedule_get_by_name(name=name)
        if row is None:
            raise ScheduleNotFound(name)
        return schedule_from_row(row)

    async def update_schedule(
        self, name: str, patch: SchedulePatch, *, actor: str | None = None
    ) -> Schedule:
        """Change a schedule's template or trigger; a changed trigger recomputes the next run.

        The next run becomes the new trigger's first after database now; with
        the trigger unchanged it stays. A schedule declared in code is refused
        (InvalidSchedule, see :func:`~jobrun.domain.declared_edit_problem`).
        ``actor`` is recorded as for :meth:`pause_schedule`.
        """
        async with self._with_tx() as tx:
            queries = schedule_queries.AsyncQuerier(tx)
            current = await queries.schedule_lock_by_name(name=name)
            if current is None:
                raise ScheduleNotFound(name)
            problem = declared_edit_problem(schedule_from_row(current))
            if problem is not None:
                raise InvalidSchedule(problem)
            new = _patched(current, patch)
            _check_trigger(new.cron, new.timezone)
            payload = normal_json(encode_payload(new.type, new.payload, self.max_payload_bytes))
            next_run_at = current.next_run_at
            if (new.cron, new.every, new.timezone) != (
                current.cron,
                current.every,
                current.timezone,
            ):
                now = await _db_now(tx)
                next_run_at = _next_run(new.cron, new.every, new.timezone, now, now)
            row = await queries.schedule_update(
                params=schedule_queries.ScheduleUpdateParams(
                    # _patched keeps the name: the row found is the row written.
                    **_schedule_columns(new, payload, next_run_at),
                    actor=bounded_actor(actor),
                )
            )
        assert row is not None
        return schedule_from_row(row)

    async def run_schedule_now(self, name: str, *, actor: str | None = None) -> Job:
        """Enqueue one job of schedule ``name``, due now, besides its regular runs.

        The schedule's next run and last run stay as they were, paused or not:
        this is an extra run, not the next one brought forward. The job has no
        idempotency key, so each call makes one more job; its enqueued event
        says which schedule it ran now for, and ``actor`` (who asked).
        ScheduleNotFound when no schedule has this name.
        """
        backoff = DEFAULT_BACKOFF
        async with self._with_tx() as tx:
            row = await schedule_queries.AsyncQuerier(tx).schedule_run_now(
                params=schedule_queries.ScheduleRunNowParams(
                    name=name,
                    id=new_job_id(),
                    backoff_kind=models.BackoffKind(backoff.kind.value),
                    backoff_base=backoff.base,
                    backoff_max=backoff.max,
                    actor=bounded_actor(actor),
                )
            )
            if row is None:
                raise ScheduleNotFound(name)
            await job_queries.AsyncQuerier(tx).job_notify(
                channel=self.notify_channel, queue=row.queue
            )
        return job_from_row(row)

    async def pause_schedule(self, name: str, *, actor: str | None = None) -> Schedule:
        """Stop a schedule from firing until it is resumed.

        ``actor`` (who asked) is stored as the schedule's ``changed_by``; None
        stores that the change named nobody.
        """
        async with self._connection() as conn:
            row = await schedule_queries.AsyncQuerier(conn).schedule_set_paused(
                name=name, paused=True, next_run_at=None, actor=bounded_actor(actor)
            )
        if row is None:
            raise ScheduleNotFound(name)
        return schedule_from_row(row)

    async def resume_schedule(self, name: str, *, actor: str | None = None) -> Schedule:
        """Let a paused schedule fire again from now on: the runs it missed are skipped.

        ``actor`` is recorded as for :meth:`pause_schedule`.
        """
        async with self._with_tx() as tx:
            queries = schedule_queries.AsyncQuerier(tx)
            current = await queries.schedule_lock_by_name(name=name)
            if current is None:
                raise ScheduleNotFound(name)
            now = await _db_now(tx)
            next_run_at = current.next_run_at
            if current.paused and next_run_at <= now:
                next_run_at = _next_run(
                    current.cron, current.every, current.timezone, current.next_run_at, now
                )
            row = await queries.schedule_set_paused(
                name=name, paused=False, next_run_at=next_run_at, actor=bounded_actor(actor)
            )
        assert row is not None
        return schedule_from_row(row)

    async def delete_schedule(self, name: str) -> None:
        """Remove a schedule; jobs it already made are left alone."""
        async with self._connection() as conn:
            deleted = await schedule_queries.AsyncQuerier(conn).schedule_delete(name=name)
        if deleted == 0:
            raise ScheduleNotFound(name)

    async def list_schedules(
        self, *, after: str | None = None, limit: int | None = None
    ) -> list[Schedule]:
        """The schedules by name: every one, or with ``limit`` a page of that many after the
        name ``after`` (a keyset page: pass the last name of one page to get the next)."""
        async with self._connection() as conn:
            querier = schedule_queries.AsyncQuerier(conn)
            if limit is None and after is None:
                rows = await querier.schedule_list()
            else:
                if limit is not None and limit < 1:
                    raise ValueError(f"limit must be at least 1, got {limit}")
                rows = await querier.schedule_page(
                    after=after, max_schedules=limit if limit is not None else 2**31 - 1
                )
        return [schedule_from_row(r) for r in rows]

    async def due_schedules(self, now: datetime) -> list[Job]:
        """Materialise every due run as a job, advance the schedules, return the new jobs.

        ``now`` is database time as read by the caller. A run whose job
        already exists (its ``sched:`` key is taken) makes no second job.
        """
        made: list[Job] = []
        async with self._with_tx() as tx:
            due = await schedule_queries.AsyncQuerier(tx).schedule_lock_due(
                now=now, max_schedules=_DUE_BATCH
            )
            jobs = job_queries.AsyncQuerier(tx)
            for row in due:
                made.extend(await _materialise(jobs, row))
                following = _next_run(row.cron, row.every, row.timezone, row.next_run_at, now)
                await schedule_queries.AsyncQuerier(tx).schedule_advance(
                    id=row.id, next_run_at=following, last_run_at=row.next_run_at
                )
            for queue in sorted({job.queue for job in made}):
                await jobs.job_notify(channel=self.notify_channel, queue=queue)
        return made

    async def renew_declarations(
        self, declared: DeclaredSet, live_for: timedelta, *, now: datetime | None = None
    ) -> datetime:
        """Record that a running process declares ``declared``, for ``live_for`` from now.

        Returns the version's ``since``: now when it was new or had lapsed
        (which makes it its group's newest), else when it appeared. ``now``
        pins the database clock (tests).
        """
        for schedule in declared.schedules:
            _check_trigger(schedule.cron, schedule.timezone)
        async with self._connection() as conn:
            row = await declaration_queries.AsyncQuerier(conn).schedule_declarations_renew(
                params=declaration_queries.ScheduleDeclarationsRenewParams(
                    declared_group=declared.group,
                    digest=declared.digest,
                    declarations=declared.to_json(),
                    now=now,
                    live_for=live_for,
                )
            )
        assert row is not None
        return utc(row.since)

    async def current_declarations(self, *, now: datetime | None = None) -> dict[str, str]:
        """Each group's current version (the digest), by group: its newest live one."""
        async with self._connection() as conn:
            rows = await declaration_queries.AsyncQuerier(conn).schedule_declarations_current(
                now=now
            )
        return {row.declared_group: row.digest for row in rows}

    async def apply_declarations(
        self, group: str, digest: str, *, now: datetime | None = None
    ) -> Reconciliation | None:
        """Write version ``digest`` of ``group``'s declarations into the schedules.

        One transaction: the group's schedules and those holding a declared
        name are locked, :func:`~jobrun.domain.reconcile_declared` decides, and
        its writes are made. None when no such version was ever recorded.
        """
        async with self._with_tx() as tx:
            stored = await declaration_queries.AsyncQuerier(tx).schedule_declarations_get(
                declared_group=group, digest=digest
            )
            if stored is None:
                return None
            declared = DeclaredSet.from_json(group, stored.declarations)
            queries = schedule_queries.AsyncQuerier(tx)
            rows = await queries.schedule_lock_for_declarations(
                declared_group=group, names=[s.name for s in declared.schedules]
            )
            at = utc(now) if now is not None else await _db_now(tx)
            plan = reconcile_declared(
                declared, [schedule_from_row(r) for r in rows], at, _first_run
            )
            for write in plan.writes:
                payload = normal_json(
                    encode_payload(
                        write.schedule.type, write.schedule.payload, self.max_payload_bytes
                    )
                )
                await _write_declared(queries, write, group, payload)
            if plan.removed:
                await queries.schedule_retire_declared(
                    now=at, actor=REMOVED_FROM_CODE, names=list(plan.removed), declared_group=group
                )
        return plan


def _schedule_columns(new: NewSchedule, payload: Any, next_run_at: datetime) -> dict[str, Any]:
    """The columns every write of a new or declared schedule sets, from ``new``."""
    return dict(
        name=new.name,
        type=new.type,
        queue=new.queue,
        payload=payload,
        priority=new.priority,
        max_attempts=new.max_attempts,
        cron=new.cron,
        every=new.every,
        timezone=new.timezone,
        next_run_at=next_run_at,
    )


async def _write_declared(
    queries: schedule_queries.AsyncQuerier, write: DeclaredWrite, group: str, payload: Any
) -> None:
    fields = _schedule_columns(write.schedule, payload, write.next_run_at)
    fields.update(declared_group=group, declared_digest=write.digest)
    if write.create:
        await queries.schedule_insert_declared(
            params=schedule_queries.ScheduleInsertDeclaredParams(**fields)
        )
        return
    await queries.schedule_update_declared(
        params=schedule_queries.ScheduleUpdateDeclaredParams(**fields, paused=write.paused)
    )


def _first_run(schedule: NewSchedule, after: datetime) -> datetime:
    """The schedule's first run strictly after ``after`` (an interval counted from it)."""
    return _next_run(schedule.cron, schedule.every, schedule.timezone, after, after)


def _patched(current: models.Schedule, patch: SchedulePatch) -> NewSchedule:
    """The schedule ``patch`` makes of ``current``, validated as create_schedule's input is.

    Only ``None`` means "not given": an explicit ``0`` or ``''`` is a value and
    must pass the same rules as a new schedule (InvalidSchedule otherwise).
    """
    cron, every = current.cron, current.every
    if patch.cron is not None:
        cron, every = patch.cron, None
    elif patch.every is not None:
        cron, every = None, patch.every
    fields: dict[str, Any] = {
        "name": current.name,
        "type": current.type if patch.type is None else patch.type,
        "queue": current.queue if patch.queue is None else patch.queue,
        "payload": current.payload if patch.payload is None else patch.payload,
        "priority": current.priority if patch.priority is None else patch.priority,
        "max_attempts": current.max_attempts if patch.max_attempts is None else patch.max_attempts,
        "cron": cron,
        "every": every,
        "timezone": current.timezone if patch.timezone is None else patch.timezone,
    }
    try:
        return NewSchedule.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'schedule'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise InvalidSchedule(f"cannot update schedule {current.name!r}: {problems}") from None


async def _db_now(conn: psycopg.AsyncConnection[Any]) -> datetime:
    now = await system_queries.AsyncQuerier(conn).database_now()
    assert now is not None
    return utc(now)


async def _materialise(jobs: job_queries.AsyncQuerier, row: models.Schedule) -> list[Job]:
    backoff = DEFAULT_BACKOFF
    inserted = await jobs.job_insert(
        params=job_queries.JobInsertParams(
            id=new_job_id(),
            queue=row.queue,
            type=row.type,
            payload=row.payload,
            priority=row.priority,
            max_attempts=row.max_attempts,
            backoff_kind=models.BackoffKind(backoff.kind.value),
            backoff_base=backoff.base,
            backoff_max=backoff.max,
            run_at=row.next_run_at,
            delay=timedelta(0),
            idempotency_key=schedule_job_key(row.id, row.next_run_at),
            # A schedule's run was caused by no request: no trace context to carry.
            meta=None,
        )
    )
    if inserted is None:
        log.info("schedule %s run %s already materialised", row.name, row.next_run_at)
        return []
    return [job_from_row(inserted)]
