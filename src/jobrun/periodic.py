"""Periodic jobs declared in code, next to their handlers, and how they reach the schedules.

Declare them on the registry, with the type (``registry.periodic("*/5 * * *
*", type="report.build", payload=...)``) or as a decorator above the handler
(``@registry.periodic("0 3 * * *")`` over ``@registry.handler(...)``). A
declaration is a schedule template (:class:`~jobrun.domain.NewSchedule`'s
fields); its queue, priority and max_attempts, when not given, are those
declared with the type's handler, else NewSchedule's. The scheduler's elected
leader writes them into the ``schedules`` table, where they fire like any
schedule.

**The rule that keeps a rolling deploy from firing twice or flapping.**

1. *Versions.* A worker whose registry declares periodic jobs records its
   group's whole set of declarations (:class:`~jobrun.domain.DeclaredSet`, one
   version, named by the SHA-256 of its content) when it starts, and renews it
   every ``periodic_renew`` while it runs; a version is *live* until three
   renewal periods (:data:`LAPSE_AFTER`) after its last renewal. A version
   that was not live when renewed (new, or lapsed) *appears*: its ``since``
   is set to database now.
2. *One current version.* Of a group's live versions, the one that appeared
   last is current: the code deployed most recently that still runs. The
   leader, whatever code it runs itself, writes the current version and only
   that one, and writes again when the current version changes. Old and new
   code running side by side agree on one definition, the newer one from the
   moment its first worker starts; a rollback's version appears anew once
   the version it replaces has stopped and lapsed, and then wins.
3. *No slot fires twice.* A schedule keeps its row, and so its id, through
   every change, and each run's job is keyed ``sched:<id>:<slot>``; a changed
   trigger runs next at its first slot after both now and the last slot
   fired. Whatever definitions a schedule goes through, and whichever leader
   writes them, no slot already fired comes due again.
4. *Only what code declared.* Rows written from declarations carry origin
   ``code`` and their group. A declared name already held by a schedule made
   through the CLI or the dashboard (or another group's) is left alone and
   logged; a schedule the current version no longer declares is paused and
   marked removed from code, never deleted, and resumes at its next slot if
   declared again. An operator's pause of a declared schedule is kept when its
   declaration changes.

A registry that declares nothing takes no part, unless it names its group
(``Registry(periodic_group=...)``): then it records an empty version, so
removing a group's last periodic job removes its schedule too. Services that
share a database and each declare periodic jobs name distinct groups.

Nothing here touches the database: this module depends on the domain only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict, TypeVar, Unpack, overload

from pydantic import BaseModel, JsonValue, ValidationError

from jobrun.cron import validate_cron, validate_timezone
from jobrun.domain import DEFAULT_DECLARED_GROUP, DeclaredSet, NewSchedule, text_problem
from jobrun.errors import ConfigurationError, InvalidSchedule

__all__ = [
    "LAPSE_AFTER",
    "Periodic",
    "PeriodicDeclarations",
    "PeriodicOptions",
    "checked_group",
    "declare",
]

LAPSE_AFTER = 3
"""A version of the declarations lapses this many renewal periods after its last renewal."""

F = TypeVar("F", bound=Callable[..., Any])


class PeriodicOptions(TypedDict, total=False):
    """The keywords of :meth:`jobrun.registry.Registry.periodic` besides the trigger and type."""

    payload: Any
    name: str
    timezone: str
    every: timedelta | float
    queue: str
    priority: int
    max_attempts: int


@dataclass(frozen=True, slots=True)
class Periodic:
    """One periodic job as declared; ``None`` options come from the handler's declared defaults."""

    name: str
    """The schedule's name (unique among all schedules); the job type unless given."""
    type: str
    """The job type it enqueues."""
    payload: JsonValue
    """The payload of every job it enqueues, as JSON."""
    cron: str | None
    """The cron expression, or None for an interval."""
    every: timedelta | None
    """The interval, or None for a cron expression."""
    timezone: str
    """The zone the cron expression is read in."""
    queue: str | None = None
    """Its jobs' queue; None: the handler's declared queue, else ``default``."""
    priority: int | None = None
    """Its jobs' priority; None: the handler's declared one, else 0."""
    max_attempts: int | None = None
    """Its jobs' attempts; None: the handler's declared ones, else NewSchedule's default."""

    def resolve(self, defaults: Any = None, payload: JsonValue | None = None) -> NewSchedule:
        """The schedule it declares, with ``defaults`` (the handler's options) filling in.

        ``payload`` replaces the declared one (the registry passes it validated
        through the handler's payload type).
        """
        defaults = defaults or {}
        fields: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "payload": self.payload if payload is None else payload,
            "cron": self.cron,
            "every": self.every,
            "timezone": self.timezone,
        }
        for option in ("queue", "priority", "max_attempts"):
            value = getattr(self, option)
            if value is None:
                value = defaults.get(option)
            if value is not None:
                fields[option] = value
        try:
            return NewSchedule(**fields)
        except InvalidSchedule as exc:
            reason = str(exc).removeprefix("invalid schedule: ")
            raise ConfigurationError(f"periodic job {self.name!r} is invalid: {reason}") from None


def declare(
    cron: str | None,
    *,
    type: str,
    payload: Any = None,
    name: str | None = None,
    timezone: str = "UTC",
    every: timedelta | float | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
) -> Periodic:
    """One periodic job, checked now: a bad one raises ConfigurationError naming it.

    Exactly one of ``cron`` and ``every`` (a timedelta, or seconds) says
    when it fires. ``payload`` is JSON or a pydantic model instance (dumped
    to JSON); ``name`` defaults to ``type``.
    """
    if isinstance(every, bool):
        raise ConfigurationError(f"every of periodic job {name or type!r} must be a duration")
    if isinstance(every, int | float):
        every = timedelta(seconds=every)
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(mode="json")
    declared = Periodic(
        name=type if name is None else name,
        type=type,
        payload={} if payload is None else payload,
        cron=cron,
        every=every,
        timezone=timezone,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
    )
    # Checked as the schedule it makes, with the options it gave; the handler's
    # defaults were checked when the handler was declared.
    schedule = declared.resolve()
    try:
        if schedule.cron is not None:
            validate_cron(schedule.cron, schedule.timezone)
        else:
            validate_timezone(schedule.timezone)
    except InvalidSchedule as exc:
        raise ConfigurationError(f"periodic job {declared.name!r} is invalid: {exc}") from None
    return Periodic(
        name=schedule.name,
        type=schedule.type,
        payload=schedule.payload,
        cron=schedule.cron,
        every=schedule.every,
        timezone=schedule.timezone,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
    )


def checked_group(group: str | None) -> str:
    """A registry's periodic group: ``group``, or the default; ConfigurationError when unusable."""
    if group is None:
        return DEFAULT_DECLARED_GROUP
    if not isinstance(group, str) or not 1 <= len(group) <= 128:
        raise ConfigurationError(f"periodic_group must be 1 to 128 characters, got {group!r}")
    problem = text_problem("periodic_group", group)
    if problem is not None:
        raise ConfigurationError(problem)
    return group


class PeriodicDeclarations:
    """The periodic half of :class:`~jobrun.registry.Registry`: declaring, and the set declared.

    Mixed into the registry, whose handlers (``_handlers``, by type, each
    with ``func``, ``adapter`` and ``defaults``) it reads to take a type, its
    payload type and its declared job options.
    """

    _handlers: Mapping[str, Any]
    _periodic: dict[str, Periodic]
    _group_named: bool
    periodic_group: str

    @overload
    def periodic(
        self, cron: str | None = None, *, type: str, **options: Unpack[PeriodicOptions]
    ) -> Periodic: ...

    @overload
    def periodic(
        self, cron: str | None = None, *, type: None = None, **options: Unpack[PeriodicOptions]
    ) -> Callable[[F], F]: ...

    def periodic(
        self, cron: str | None = None, *, type: str | None = None, **options: Any
    ) -> Periodic | Callable[[F], F]:
        """Declare a job of ``type`` enqueued on ``cron`` (or ``every=``), kept in the schedules.

        With ``type`` it returns the declaration; without, it is a decorator
        for a function registered with
        :meth:`~jobrun.registry.Registry.handler`, placed above it, and
        takes that handler's type. ``options``: ``payload`` (JSON or a model
        instance, validated by the handler's payload type), ``name`` (unique
        among all schedules; the type by default), ``timezone`` (of the cron
        expression, UTC by default), ``every`` (an interval, instead of
        ``cron``), ``queue``, ``priority`` and ``max_attempts`` (by default the
        handler's declared ones). Checked here: a bad one raises
        ConfigurationError. The scheduler's leader writes the declarations
        into the schedules table by the rule of :mod:`jobrun.periodic`.
        """
        if type is not None:
            return self._declare(declare(cron, type=type, **options))

        def decorate(func: F) -> F:
            owners = [h.type for h in self._handlers.values() if h.func is func]
            if len(owners) != 1:
                raise ConfigurationError(
                    "@registry.periodic(...) without type= goes above "
                    "@registry.handler(type) on the function it registers"
                    + (f" (it is registered for {owners})" if owners else "")
                )
            self._declare(declare(cron, type=owners[0], **options))
            return func

        return decorate

    def _declare(self, declared: Periodic) -> Periodic:
        if declared.name in self._periodic:
            raise ConfigurationError(f"a periodic job named {declared.name!r} is already declared")
        self._periodic_payload(declared)  # refuses a payload its handler would refuse
        self._periodic[declared.name] = declared
        return declared

    @property
    def periodic_jobs(self) -> tuple[Periodic, ...]:
        """The periodic jobs declared, in the order declared."""
        return tuple(self._periodic.values())

    def declared_schedules(self) -> DeclaredSet | None:
        """This registry's periodic jobs as the schedules they declare, or None to take no part.

        Each takes its handler's declared queue, priority and max_attempts
        where it gave none, and its payload goes through the handler's
        payload type. None when nothing is declared and no group was named.
        """
        if not self._periodic and not self._group_named:
            return None
        schedules = tuple(
            p.resolve(self._defaults_of(p.type), self._periodic_payload(p))
            for p in self._periodic.values()
        )
        return DeclaredSet(self.periodic_group, schedules)

    def _defaults_of(self, job_type: str) -> Mapping[str, Any]:
        entry = self._handlers.get(job_type)
        return {} if entry is None else entry.defaults

    def _periodic_payload(self, declared: Periodic) -> Any:
        entry = self._handlers.get(declared.type)
        if entry is None or entry.adapter is None:
            return None
        try:
            value = entry.adapter.validate_python(declared.payload)
        except ValidationError as exc:
            raise ConfigurationError(
                f"payload of periodic job {declared.name!r} does not validate as "
                f"{declared.type!r}'s payload: {self._summary(exc)}"
            ) from None
        return entry.adapter.dump_python(value, mode="json")

    def _summary(self, exc: ValidationError) -> str:
        return "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
