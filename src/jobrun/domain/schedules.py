"""Schedules: a job template the scheduler fires on a cron expression or a fixed interval.

Besides the schedules an operator makes, a group of periodic jobs declared in
code (:class:`DeclaredSet`) and the plan that writes it into the stored
schedules (:func:`reconcile_declared`) live here, as plain data and one pure
function; :mod:`jobrun.periodic` states the rule they follow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from pydantic import BaseModel, Field, JsonValue, ValidationInfo, field_validator, model_validator

from jobrun.domain.inputs import (
    InputModel,
    bounded_nesting,
    check_every,
    checked_queue,
    checked_text,
)
from jobrun.domain.rules import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    MAX_ATTEMPTS_LIMIT,
    MAX_PRIORITY,
    MIN_PRIORITY,
    schedule_name_problem,
)
from jobrun.errors import InvalidSchedule, JobrunError

__all__ = [
    "DEFAULT_DECLARED_GROUP",
    "REMOVED_FROM_CODE",
    "DeclaredSet",
    "DeclaredWrite",
    "NewSchedule",
    "Reconciliation",
    "Schedule",
    "SchedulePatch",
    "declaration_digest",
    "declared_edit_problem",
    "reconcile_declared",
]


class NewSchedule(InputModel):
    """A schedule to create: a job template fired on a cron expression or a fixed interval."""

    _invalid: ClassVar[type[JobrunError]] = InvalidSchedule
    _what: ClassVar[str] = "schedule"

    name: str = Field(min_length=1, max_length=255)
    type: str = Field(min_length=1, max_length=255)
    payload: JsonValue = Field(default_factory=dict)
    queue: str = Field(default=DEFAULT_QUEUE, min_length=1, max_length=128)
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=MAX_ATTEMPTS_LIMIT)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"

    _payload = field_validator("payload", mode="wrap")(bounded_nesting)
    _queue = field_validator("queue")(checked_queue)

    @field_validator("name", "type", "cron", "timezone")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        return checked_text(value, info)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = schedule_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_trigger(self) -> NewSchedule:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of cron and every")
        check_every(self.every)
        return self


class SchedulePatch(InputModel):
    """Fields of a schedule to change; ``None`` leaves a field as it is."""

    _invalid: ClassVar[type[JobrunError]] = InvalidSchedule
    _what: ClassVar[str] = "schedule change"

    type: str | None = Field(default=None, min_length=1, max_length=255)
    payload: JsonValue | None = None
    queue: str | None = Field(default=None, min_length=1, max_length=128)
    priority: int | None = Field(default=None, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    max_attempts: int | None = Field(default=None, ge=1, le=MAX_ATTEMPTS_LIMIT)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str | None = None

    _payload = field_validator("payload", mode="wrap")(bounded_nesting)
    _queue = field_validator("queue")(checked_queue)

    @field_validator("type", "cron", "timezone")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        return checked_text(value, info)

    @model_validator(mode="after")
    def _check(self) -> SchedulePatch:
        if self.cron is not None and self.every is not None:
            raise ValueError("give cron or every, not both")
        check_every(self.every)
        return self


class Schedule(BaseModel):
    """A stored schedule; ``changed_by`` names who last paused, resumed or edited it, if said.

    ``origin`` says where it comes from: ``"manual"`` (the CLI, the dashboard,
    :meth:`~jobrun.ports.ScheduleStore.create_schedule`) or ``"code"`` (a
    periodic job declared with its handler, see :mod:`jobrun.periodic`),
    written from the declarations of ``declared_group``, as ``declared_digest``
    (a hash of the declaration's content) says; ``removed_from_code_at`` is set,
    and the schedule paused, once that group's code no longer declares it.
    """

    id: int
    name: str
    type: str
    queue: str
    payload: JsonValue
    priority: int
    max_attempts: int
    cron: str | None
    every: timedelta | None
    timezone: str
    next_run_at: datetime
    last_run_at: datetime | None
    paused: bool
    created_at: datetime
    updated_at: datetime
    changed_by: str | None = None
    origin: str = "manual"
    declared_group: str | None = None
    declared_digest: str | None = None
    removed_from_code_at: datetime | None = None


def declared_edit_problem(schedule: Schedule) -> str | None:
    """Why ``schedule`` cannot be edited by an operator, or None when it can.

    A schedule declared in code is written from its declaration whenever a
    new version of its group's code runs, so an edit would last only until
    then, and while the code is unchanged it would silently differ from it:
    its declaration is the place to change it. Pausing, resuming, running
    it now and deleting it stay open (a deploy keeps an operator's pause).
    """
    if schedule.origin != "code":
        return None
    return (
        f"schedule {schedule.name!r} is declared in code (group "
        f"{schedule.declared_group!r}): change its declaration there, since the next deploy "
        "would write the declaration over an edit made here"
    )


DEFAULT_DECLARED_GROUP = "default"
"""The group of a registry's periodic jobs when it names none."""

REMOVED_FROM_CODE = "jobrun: removed from code"
"""What a schedule removed from code records as ``changed_by``."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def declaration_digest(schedule: NewSchedule) -> str:
    """The SHA-256 (hex) of one declared schedule's content: what a stored row is compared by."""
    return hashlib.sha256(_canonical(schedule.model_dump(mode="json")).encode()).hexdigest()


@dataclass(frozen=True)
class DeclaredSet:
    """One group's periodic jobs as one version of its code declares them, by name.

    ``digest`` (SHA-256, hex) identifies the version: two processes running
    the same declarations compute the same digest, whatever order they were
    declared in.
    """

    group: str
    """The group the declarations belong to (:data:`DEFAULT_DECLARED_GROUP` unless named)."""
    schedules: tuple[NewSchedule, ...]
    """The declared schedules, sorted by name."""
    digest: str = field(init=False)
    """The SHA-256 of the whole set's content."""

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.schedules, key=lambda s: s.name))
        names = [s.name for s in ordered]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise InvalidSchedule(f"periodic jobs declared twice under one name: {duplicated}")
        object.__setattr__(self, "schedules", ordered)
        content = _canonical(self.to_json()).encode()
        object.__setattr__(self, "digest", hashlib.sha256(content).hexdigest())

    def to_json(self) -> list[JsonValue]:
        """The declarations as JSON, as stored in ``schedule_declarations``."""
        return [s.model_dump(mode="json") for s in self.schedules]

    @classmethod
    def from_json(cls, group: str, value: JsonValue) -> DeclaredSet:
        """The set :meth:`to_json` wrote; InvalidSchedule when ``value`` is not one."""
        if not isinstance(value, list):
            raise InvalidSchedule(f"declarations of group {group!r} are not a list")
        return cls(group, tuple(NewSchedule.model_validate(item) for item in value))


@dataclass(frozen=True, slots=True)
class DeclaredWrite:
    """One declared schedule to write: created, or its row rewritten."""

    schedule: NewSchedule
    """The schedule as declared."""
    digest: str
    """:func:`declaration_digest` of ``schedule``."""
    next_run_at: datetime
    """Its next run after the write."""
    paused: bool
    """Whether it is paused after the write (an operator's pause is kept)."""
    create: bool
    """True when no row holds its name yet."""


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What writing a :class:`DeclaredSet` into the stored schedules does."""

    group: str
    """The group written."""
    digest: str
    """The version written."""
    writes: tuple[DeclaredWrite, ...] = ()
    """Schedules created or rewritten."""
    removed: tuple[str, ...] = ()
    """Schedules of the group this version no longer declares: paused, marked removed."""
    left_alone: tuple[tuple[str, str], ...] = ()
    """Declared names held by a schedule the group does not own, and whose it is."""


NextRun = Callable[[NewSchedule, datetime], datetime]
"""A schedule's first run strictly after a time (an interval counted from that time)."""


def reconcile_declared(
    declared: DeclaredSet, rows: Sequence[Schedule], now: datetime, next_run: NextRun
) -> Reconciliation:
    """The writes that make the stored schedules match ``declared``, decided once, here.

    ``rows`` are the group's stored schedules and any schedule holding a
    declared name; ``now`` is database time. The rules:

    * a declared name nobody holds: created, first run after ``now``;
    * a name held by a schedule made through the CLI or the dashboard, or
      declared by another group: left alone;
    * a schedule of the group whose content differs (its digest), or that had
      been removed from code: rewritten. Its row, its id and so its jobs'
      ``sched:<id>:<slot>`` keys stay. A changed trigger (cron, interval or
      zone), or a schedule declared again, runs next at its first slot after
      both ``now`` and its last run, so no slot already fired can come due
      again; otherwise its next run stays. A pause by an operator is kept; a
      schedule declared again is resumed;
    * a schedule of the group the set no longer declares: paused and marked
      removed from code (never deleted).
    """
    held = {row.name: row for row in rows}
    writes: list[DeclaredWrite] = []
    left_alone: list[tuple[str, str]] = []
    for schedule in declared.schedules:
        digest = declaration_digest(schedule)
        row = held.get(schedule.name)
        if row is None:
            first = next_run(schedule, now)
            writes.append(DeclaredWrite(schedule, digest, first, paused=False, create=True))
            continue
        if row.origin != "code" or row.declared_group != declared.group:
            owner = (
                f"declared by group {row.declared_group!r}"
                if row.origin == "code"
                else "made through the CLI or the dashboard"
            )
            left_alone.append((schedule.name, owner))
            continue
        revived = row.removed_from_code_at is not None
        if row.declared_digest == digest and not revived:
            continue
        next_run_at = row.next_run_at
        if revived or (schedule.cron, schedule.every, schedule.timezone) != (
            row.cron,
            row.every,
            row.timezone,
        ):
            after = now if row.last_run_at is None else max(now, row.last_run_at)
            next_run_at = next_run(schedule, after)
        paused = False if revived else row.paused
        writes.append(DeclaredWrite(schedule, digest, next_run_at, paused=paused, create=False))
    declared_names = {s.name for s in declared.schedules}
    removed = tuple(
        row.name
        for row in rows
        if row.origin == "code"
        and row.declared_group == declared.group
        and row.removed_from_code_at is None
        and row.name not in declared_names
    )
    return Reconciliation(
        declared.group, declared.digest, tuple(writes), removed, tuple(left_alone)
    )
