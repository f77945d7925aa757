"""The handler registry: which function runs a job of which type, and how.

A worker looks each claimed job's type up here. A handler is an ``async def``
(run on the worker's event loop) or a plain ``def`` (run in a worker thread);
both receive a :class:`JobContext` and the job's payload, and may return a
:class:`~jobrun.domain.CommitCallback` that the store runs inside the completion
transaction, so the handler's database writes commit exactly once, with the
job. It may also return a value (JSON, or a pydantic model), stored as the
job's result in that same transaction; :class:`~jobrun.domain.Result` returns
a value and a callback together. ``result=`` declares the value's type.

A handler may declare the type of its payload (a pydantic model, or anything
pydantic can validate). The payload is validated before the handler runs, and
producers can build jobs through the same type with :meth:`Registry.new_job`,
so both sides agree on one schema.

What a payload that does not validate does: a producer that holds the
registry (a :class:`~jobrun.client.Client` with handlers, ``jobrun enqueue
--app``) refuses it at enqueue, as it refuses a type with no handler. One that
still reaches a worker fails its attempt with an :class:`InvalidPayload`
message and is retried on the bounded policy of :mod:`jobrun.unrunnable` (a
few attempts about an hour in all, then ``dead``), not on the job's own
backoff. A payload never changes, but the *model* does: during a rolling
deploy a job written by a new producer can reach a worker still running the
old model, and the retry is what lets a new worker pick it up.

A handler may also declare its type's job options (:mod:`jobrun.job_defaults`)
and, with :meth:`Registry.periodic`, jobs enqueued on a schedule
(:mod:`jobrun.periodic`).

What a handler receives and raises (:class:`JobContext`, :class:`Cancel`,
:class:`Snooze`) lives in :mod:`jobrun.handler_context`, re-exported here.

Nothing here touches the database: this module depends on the domain and on
those three modules only.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from jobrun.domain import Backoff, Job, NewJob, Unique
from jobrun.errors import (
    ConfigurationError,
    InvalidJob,
    InvalidPayload,
    InvalidResult,
    UnknownJobType,
)
from jobrun.handler_context import MAX_SNOOZE, Cancel, CancellationToken, JobContext, Snooze
from jobrun.job_defaults import IdempotencyKeyPolicy, KeyFunction, declared_options, fill_in
from jobrun.periodic import Periodic, PeriodicDeclarations, checked_group

__all__ = [
    "MAX_SNOOZE",
    "AsyncHandler",
    "Cancel",
    "CancellationToken",
    "Handler",
    "HandlerFunc",
    "InvalidPayload",
    "JobContext",
    "Registry",
    "Snooze",
    "SyncHandler",
    "registry",
]


AsyncHandler: TypeAlias = Callable[[JobContext, Any], Awaitable[Any]]
"""``async def handler(ctx, payload)``, returning None, a commit callback, a
JSON value to store as the job's result, or a :class:`~jobrun.domain.Result`."""
SyncHandler: TypeAlias = Callable[[JobContext, Any], Any]
"""``def handler(ctx, payload)``, run in a worker thread; returns as an async one does."""
HandlerFunc: TypeAlias = AsyncHandler | SyncHandler
"""Either kind of handler."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Handler:
    """One registered handler and its options."""

    type: str
    """The job type it handles."""
    func: HandlerFunc
    """The function itself."""
    is_async: bool
    """True for ``async def`` handlers, which run on the event loop."""
    payload_type: Any = None
    """The declared payload type, or ``None`` to receive the raw JSON value."""
    timeout: timedelta | None = None
    """This type's per-attempt time limit; ``None`` uses the worker's."""
    adapter: TypeAdapter[Any] | None = None
    """The validator built from ``payload_type``."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The job options declared with the handler (``queue``, ``priority``,
    ``max_attempts``, ``backoff``, ``unique``), by name; only those declared are present."""
    idempotency_key: IdempotencyKeyPolicy | None = None
    """How jobs of the type enqueued without a key get one; None: they get none."""
    result_type: Any = None
    """The declared type of what the handler returns, or ``None`` for any JSON value."""
    result_adapter: TypeAdapter[Any] | None = None
    """The validator built from ``result_type``."""

    def result_json(self, value: Any) -> Any:
        """``value`` as the JSON value to store: validated into the declared result
        type, if any, and a pydantic model dumped; raises ValueError when it does not fit."""
        if self.result_adapter is not None:
            try:
                value = self.result_adapter.validate_python(value)
            except ValidationError as exc:
                raise InvalidResult(
                    f"result of {self.type!r} does not match its declared type: {_summarise(exc)}"
                ) from None
            return self.result_adapter.dump_python(value, mode="json")
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        return value

    def parse_payload(self, job: Job) -> Any:
        """The job's payload, validated into the declared type; raises :class:`InvalidPayload`."""
        if self.adapter is None:
            return job.payload
        try:
            return self.adapter.validate_python(job.payload)
        except ValidationError as exc:
            raise InvalidPayload(self.type, _summarise(exc)) from None


_NO_DEFAULTS: Mapping[str, Any] = MappingProxyType({})


def _summarise(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "payload"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


class Registry(PeriodicDeclarations, Mapping[str, Handler]):
    """Handlers by job type; a read-only mapping once built.

    Register with the :meth:`handler` decorator or :meth:`register`. A type
    can be registered once: a second registration is a configuration error,
    not a silent override. Periodic jobs are declared with :meth:`periodic`;
    ``periodic_group`` names the group they belong to (see
    :mod:`jobrun.periodic`; services sharing a database that each declare
    periodic jobs name distinct groups).
    """

    def __init__(self, *, periodic_group: str | None = None) -> None:
        self._handlers: dict[str, Handler] = {}
        self._periodic: dict[str, Periodic] = {}
        self._group_named = periodic_group is not None
        self.periodic_group = checked_group(periodic_group)
        """The group this registry's periodic jobs are declared in."""

    def register(
        self,
        job_type: str,
        func: HandlerFunc,
        *,
        payload: Any = None,
        timeout: timedelta | float | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        idempotency_key: KeyFunction | Sequence[str] | None = None,
        result: Any = None,
        unique: Unique | None = None,
        concurrency_limit: int | None = None,
    ) -> Handler:
        """Register ``func`` for ``job_type``; see :meth:`handler` for the options."""
        if not job_type or len(job_type) > 255:
            raise ConfigurationError(f"job type must be 1 to 255 characters, got {job_type!r}")
        if job_type in self._handlers:
            raise ConfigurationError(f"a handler is already registered for {job_type!r}")
        if not callable(func):
            raise ConfigurationError(f"handler for {job_type!r} is not callable")
        if isinstance(timeout, int | float):
            timeout = timedelta(seconds=timeout)
        if timeout is not None and timeout <= timedelta(0):
            raise ConfigurationError(f"timeout of {job_type!r} must be positive")
        adapter = None
        if payload is not None:
            try:
                adapter = TypeAdapter(payload)
            except Exception as exc:
                raise ConfigurationError(
                    f"payload type of {job_type!r} cannot be validated: {exc}"
                ) from exc
        result_adapter = None
        if result is not None:
            try:
                result_adapter = TypeAdapter(result)
            except Exception as exc:
                raise ConfigurationError(
                    f"result type of {job_type!r} cannot be validated: {exc}"
                ) from exc
        if unique is not None and idempotency_key is not None:
            raise ConfigurationError(
                f"handler {job_type!r} declares idempotency_key and unique: give one"
            )
        defaults = declared_options(
            job_type,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            backoff=backoff,
            unique=unique,
            concurrency_limit=concurrency_limit,
        )
        policy = None
        if idempotency_key is not None:
            policy = IdempotencyKeyPolicy(job_type, idempotency_key)
        entry = Handler(
            type=job_type,
            func=func,
            is_async=inspect.iscoroutinefunction(func),
            payload_type=payload,
            timeout=timeout,
            adapter=adapter,
            defaults=MappingProxyType(defaults),
            idempotency_key=policy,
            result_type=result,
            result_adapter=result_adapter,
        )
        self._handlers[job_type] = entry
        return entry

    def handler(
        self,
        job_type: str,
        *,
        payload: Any = None,
        timeout: timedelta | float | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        idempotency_key: KeyFunction | Sequence[str] | None = None,
        result: Any = None,
        unique: Unique | None = None,
        concurrency_limit: int | None = None,
    ) -> Callable[[F], F]:
        """Decorate a handler for ``job_type``.

        ``payload`` is the type the JSON payload is validated into before the
        handler runs (a pydantic model, ``Model | None``, ``list[int]``, ...);
        without it the handler receives the raw JSON value. ``timeout`` limits
        each attempt (seconds or a timedelta) and overrides the worker's
        ``job_timeout``. The decorated function is returned unchanged.

        ``queue``, ``priority``, ``max_attempts`` and ``backoff`` are this
        type's defaults for the :class:`NewJob` fields of those names: jobs
        built by :meth:`new_job`, or enqueued through a client that holds this
        registry, take them when the caller gives none. They are checked here,
        by the rules a :class:`NewJob` applies, so a bad one fails at import.
        ``idempotency_key`` keys those jobs when the caller gives no key: a
        sequence of payload fields, or a function of the JSON payload (see
        :class:`~jobrun.job_defaults.IdempotencyKeyPolicy`).

        ``result`` declares the type of what the handler returns (a pydantic
        model, ``list[int]``, ...): the worker validates each returned value
        into it before storing it, and :meth:`jobrun.Client.result` gives it
        back as that type. Without it any JSON value may be returned.

        ``unique`` is this type's uniqueness policy
        (:class:`~jobrun.domain.Unique`), applied as the other options are to
        jobs that set none (and carry no idempotency key).

        ``concurrency_limit`` is this type's limit per concurrency key: of the
        jobs enqueued with the same ``concurrency_key`` (a customer, an
        account), at most this many run at a time, fleet-wide.
        """

        def decorate(func: F) -> F:
            self.register(
                job_type,
                func,
                payload=payload,
                timeout=timeout,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                backoff=backoff,
                idempotency_key=idempotency_key,
                result=result,
                unique=unique,
                concurrency_limit=concurrency_limit,
            )
            return func

        return decorate

    def get(self, job_type: str, default: Any = None) -> Any:
        """The handler for ``job_type``, or ``default``."""
        return self._handlers.get(job_type, default)

    def lookup(self, job_type: str) -> Handler:
        """The handler for ``job_type``; raises :class:`UnknownJobType` when there is none."""
        try:
            return self._handlers[job_type]
        except KeyError:
            raise UnknownJobType(job_type) from None

    def payload_model(self, job_type: str) -> Any:
        """The payload type declared for ``job_type`` (``None`` when it declared none)."""
        return self.lookup(job_type).payload_type

    def payload_models(self) -> dict[str, type[BaseModel]]:
        """The declared payload types that are pydantic models, by job type.

        A :class:`~jobrun.client.Client` hands them to its store, which then
        refuses at enqueue a payload the handler would refuse when it runs.
        """
        return {
            h.type: h.payload_type
            for h in self._handlers.values()
            if isinstance(h.payload_type, type) and issubclass(h.payload_type, BaseModel)
        }

    def new_job(self, job_type: str, payload: Any = None, **options: Any) -> NewJob:
        """Build a :class:`NewJob` whose payload went through the handler's payload type.

        ``payload`` may be a model instance or plain data; it is validated and
        dumped to JSON the same way the worker will read it back, so a job
        that would not validate is refused here with :class:`InvalidPayload`.
        ``options`` are the other :class:`NewJob` fields (queue, priority, ...);
        those not given take the defaults declared with the handler, and the
        idempotency key, when not given, its key policy's.
        """
        entry = self.lookup(job_type)
        if entry.adapter is None:
            data = {} if payload is None else payload
        else:
            try:
                value = entry.adapter.validate_python(payload)
            except ValidationError as exc:
                raise InvalidPayload(job_type, _summarise(exc)) from None
            data = entry.adapter.dump_python(value, mode="json")
        fields = {**entry.defaults, **options}
        if entry.idempotency_key is not None and "idempotency_key" not in options:
            key = entry.idempotency_key.key_for(data)
            if key is not None:
                fields["idempotency_key"] = key
        return NewJob(type=job_type, payload=data, **fields)

    def defaults_for(self, job_type: str) -> Mapping[str, Any]:
        """The job options declared with ``job_type``'s handler; empty for an unknown type."""
        entry = self._handlers.get(job_type)
        return _NO_DEFAULTS if entry is None else entry.defaults

    def with_defaults(self, job: NewJob) -> NewJob:
        """``job`` with its type's declared defaults in the fields its caller did not set.

        A field counts as set when it was given to the constructor, even with
        the value it would have defaulted to (``NewJob(..., queue="default")``
        keeps ``"default"``, ``idempotency_key=None`` keeps no key); see
        :func:`~jobrun.job_defaults.fill_in`. A job whose type declares no
        defaults is returned as it is.
        """
        entry = self._handlers.get(job.type)
        if entry is None or (not entry.defaults and entry.idempotency_key is None):
            return job
        return fill_in(job, entry.defaults, entry.idempotency_key)

    def options_for_many(self, job_type: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """``enqueue_many``'s options for ``job_type``: those given over the declared ones.

        Jobs enqueued alike carry no idempotency key, so a type that declares
        a key policy is refused with InvalidJob (enqueue them with
        ``enqueue_batch``, which keys each job).
        """
        entry = self._handlers.get(job_type)
        if entry is None:
            return dict(options)
        if entry.idempotency_key is not None:
            raise InvalidJob(
                f"job type {job_type!r} declares an idempotency key, which jobs enqueued "
                "alike cannot carry: enqueue them with enqueue_batch"
            )
        return {**entry.defaults, **options}

    def __getitem__(self, job_type: str) -> Handler:
        return self._handlers[job_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)


registry = Registry()
"""The default registry, for applications that need only one."""


def registry_given(registry: object, root: str) -> Registry:
    """``registry``, or an empty one for None; one clear error for anything else.

    ``Client(Config(...))`` is an easy slip (the registry comes first): it is
    named at once instead of failing when the client opens.
    """
    if registry is None:
        return Registry()
    if isinstance(registry, Registry):
        return registry
    hint = ""
    if type(registry).__name__ == "Config":
        hint = ": pass the settings as config="
    raise ConfigurationError(
        f"{root}'s first argument is a jobrun.Registry, got {type(registry).__name__}{hint}"
    )
