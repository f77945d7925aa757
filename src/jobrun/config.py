"""One typed configuration for everything a :class:`~jobrun.client.Client` runs.

Every setting has a default that works, is validated here once (bad values
raise :class:`~jobrun.errors.ConfigurationError` naming the setting), and
can come from the environment: ``JOBRUN_`` and the setting's name in capitals
(``JOBRUN_CONCURRENCY=50``, ``JOBRUN_LEASE=1m``). The CLI reads the same
variables, so a service, a script and ``jobrun worker`` configured by one
environment behave alike. Durations are written as the CLI writes them
(``30s``, ``5m``, ``1h30m``) or given as :class:`~datetime.timedelta`.
"""

from __future__ import annotations

from datetime import timedelta
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AliasChoices, BeforeValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from jobrun.domain import (
    DEFAULT_NOTIFY_CHANNEL,
    EventMode,
    describe_invalid,
    notify_channel_problem,
    queue_name_problem,
)
from jobrun.durations import format_duration, parse_duration
from jobrun.errors import ConfigurationError
from jobrun.retention import Retention, retention_problem
from jobrun.unrunnable import (
    DEFAULT_UNRUNNABLE_ATTEMPTS,
    DEFAULT_UNRUNNABLE_RETRY,
    UnrunnableRetry,
)

__all__ = ["DEFAULT_CLAIM_AHEAD", "DEFAULT_YOUNG_THRESHOLD", "Config", "queue_list"]

DEFAULT_CLAIM_AHEAD = timedelta(milliseconds=50)
"""How much work a busy worker claims ahead of its free slots, in time.

Each claim and each completion statement has a fixed cost on the server
(about half a millisecond on a small machine), so a worker whose slots free a
few at a time pays it for a few jobs. While its last claim came back full, a
worker therefore also leases as many jobs as it has been starting in this
long (never more than ten times its concurrency) and starts them as slots
free. A job waits in that buffer about this long; one still waiting ten
times as long (at least half a second: the worker's jobs got slower) is
handed back for other workers to take. Jobs that run for seconds make the
buffer a job or two, and an idle or drained queue makes it nothing, so only
a worker starting thousands of jobs a second claims noticeably ahead; there
it cut the server's work per job by a tenth to a sixth at the default
concurrency.
Buffered jobs are leased: they count against a queue's concurrency limit,
are heartbeated like running jobs, are stopped if cancelled, and are handed
back, their attempt not counted, when the worker stops.
"""

DEFAULT_YOUNG_THRESHOLD = 10_000
"""The young-generation threshold a worker runs with unless configured otherwise
(see :mod:`jobrun._gc_tuning`)."""

_MAX_CONCURRENCY = 10_000


def _duration(value: Any) -> Any:
    if isinstance(value, str) and value.strip() and not value.strip().isdigit():
        return parse_duration(value)
    return value


def queue_list(text: str) -> list[str]:
    """The queue names in ``text``, separated by commas, whitespace or both (``mail, default``).

    No queue name holds either separator (:func:`~jobrun.domain.queue_name_problem`),
    so every list reads one way.
    """
    return text.replace(",", " ").split()


def _queues(value: Any) -> Any:
    if isinstance(value, str):
        value = queue_list(value)
    if isinstance(value, list | tuple):
        # Each queue once, in the order given.
        return list(dict.fromkeys(value))
    return value


def _off(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("off", "none"):
        return None
    return value


Duration = Annotated[timedelta, BeforeValidator(_duration)]
OptionalDuration = Annotated[Duration | None, BeforeValidator(_off)]
"""A duration that ``off`` (or ``none``) turns off, as a variable or an option."""


def _as_variable(value: Any) -> str:
    """``value`` written as a ``JOBRUN_*`` variable's text that reads back equal."""
    if value is None:
        return "off"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        # Whole microseconds in seconds: exact, and read back by the duration parser.
        seconds, micros = divmod(value // timedelta(microseconds=1), 1_000_000)
        return f"{seconds}.{micros:06d}s"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


class Config(BaseSettings):
    """Settings of a jobrun client and its worker, from arguments or ``JOBRUN_*`` variables.

    Arguments win over the environment; the environment wins over defaults.
    ``database_url`` left unset means the embedded PostgreSQL (the
    ``jobrun[embedded]`` extra). ``heartbeat_every`` left unset is a third of
    the lease, at most 10 s.
    """

    model_config = SettingsConfigDict(
        env_prefix="JOBRUN_",
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,
    )

    database_url: str | None = Field(default=None, repr=False)
    """PostgreSQL connection URL; unset: the embedded server."""
    pgbouncer: bool = False
    """``database_url`` is PgBouncer in transaction mode: pooled connections keep no
    session state and prepare no statements; LISTEN and leader locks need ``direct_url``
    (without it the worker polls and leader locks are transaction-scoped)."""
    direct_url: str | None = Field(default=None, repr=False)
    """A URL straight to the server, for what needs a session of its own: the LISTEN
    connection, leader locks and migrations. Unset: ``database_url``."""
    read_url: str | None = Field(default=None, repr=False)
    """A read replica (a streaming standby) for reads that may be a little stale: the
    dashboard's pages, ``jobrun jobs list/show``, ``events`` and ``stats``, which show
    its lag. Writes, claims and locks always go to ``database_url``. Unset: every read
    goes there too."""
    listen: bool = True
    """Wake idle workers by LISTEN/NOTIFY; off: poll only (also off behind PgBouncer
    without ``direct_url``)."""
    handoff: bool = True
    """Let an idle listening worker offer its free slots, so that a single enqueue due
    now leases its job to the worker at once (no claim round trip); off: every job
    waits for a claim, in strict priority order."""
    queues: Annotated[list[str], NoDecode, BeforeValidator(_queues)] = Field(
        default_factory=lambda: ["default"],
        validation_alias=AliasChoices("queues", "JOBRUN_QUEUES", "JOBRUN_QUEUE"),
    )
    """Queues the worker claims from (``JOBRUN_QUEUE=mail,default``)."""
    concurrency: int = Field(default=100, ge=1, le=_MAX_CONCURRENCY)
    """Jobs run at once by one worker (async handlers as tasks, sync ones on as many
    threads). The pool is not one connection per job (see
    :func:`jobrun.postgres.pool.pool_max_size`)."""
    claim_ahead: Duration = Field(default=DEFAULT_CLAIM_AHEAD, le=timedelta(minutes=1))
    """How much work a busy worker leases beyond its free slots, as time at the rate its
    jobs have been starting (at most ten times ``concurrency``); those jobs start as slots
    free and are handed back, the attempt not counted, at shutdown or once they have waited
    ten times this long. ``0s``: claim for free slots only (see
    :data:`DEFAULT_CLAIM_AHEAD`)."""
    lease: Duration = timedelta(seconds=30)
    """How long a claim holds a job without a heartbeat."""
    heartbeat_every: OptionalDuration = Field(
        default=None, validation_alias=AliasChoices("heartbeat_every", "JOBRUN_HEARTBEAT")
    )
    """How often running jobs' leases are extended; at most a third of the lease."""
    poll: Duration = timedelta(seconds=1)
    """How often an idle worker claims without a notification (the guarantee)."""
    job_timeout: OptionalDuration = None
    """Limit of one attempt, unless the handler sets its own."""
    shutdown_grace: Duration = timedelta(seconds=30)
    """How long running jobs may finish after a stop request."""
    event_mode: EventMode = EventMode.ALL
    """Which transitions are recorded in job_events (``terminal`` skips claims)."""
    scheduler: bool = False
    """Also run the leader-elected scheduler with the worker."""
    scheduler_tick: Duration = timedelta(seconds=1)
    """How often the scheduler's leader looks for due schedules."""
    periodic_renew: Duration = timedelta(seconds=10)
    """How often a worker whose registry declares periodic jobs renews them as running; a
    version of the declarations not renewed for three times this long lapses, and the newest
    version still running takes over its schedules."""
    notify_channel: str = Field(default=DEFAULT_NOTIFY_CHANNEL, min_length=1, max_length=63)
    """The LISTEN/NOTIFY channel; producers and workers must agree on it."""
    commit_timeout: Duration = timedelta(seconds=30)
    """Bound of a completion transaction with commit callbacks."""
    retry_jitter: float = Field(default=0.1, ge=0, le=0.5)
    """Spread of a failed job's backoff, as a fraction either way (0 turns it off)."""
    reap_every: OptionalDuration = timedelta(seconds=5)
    """How often the worker's reaper looks for expired leases (None or ``off``: no reaper)."""
    completion_batch: int = Field(default=1000, ge=1, le=100_000)
    """Most outcomes the completer records in one batch."""
    unrunnable_attempts: int = Field(default=DEFAULT_UNRUNNABLE_ATTEMPTS, ge=1)
    """Attempts a job gets, at most, when the worker cannot run it (its type has no
    handler, its payload does not validate): a rolling deploy may bring a worker that
    can; then it ends dead (see :mod:`jobrun.unrunnable`)."""
    unrunnable_retry: Duration = DEFAULT_UNRUNNABLE_RETRY
    """How long such a job waits between those attempts."""
    gc_young_threshold: Annotated[int | None, BeforeValidator(_off)] = Field(
        default=DEFAULT_YOUNG_THRESHOLD, ge=1
    )
    """While a worker runs, and while a client's ``enqueue_batch`` runs, CPython's
    young-generation collection threshold is raised to at least this many allocations
    (the interpreter's default, 700, had the cyclic collector take a sixth of a busy
    worker's time, and a fifth of a batch enqueue's); put back when it ends. A worker
    raises it to at least 40 per slot of its ``concurrency`` too, as its jobs in flight
    hold that many objects. None (``JOBRUN_GC_YOUNG_THRESHOLD=off``): leave the
    collector alone."""
    metrics_port: Annotated[int | None, BeforeValidator(_off)] = Field(default=None, ge=0, le=65535)
    """Count jobs for Prometheus and serve /metrics, /healthz, /readyz on this port while
    a worker runs (0: any free port); needs the ``jobrun[metrics]`` extra. None: off."""
    metrics_host: str = Field(default="127.0.0.1", min_length=1)
    """The address the metrics server binds; the loopback unless exposed on purpose."""
    queue_stats_every: Duration = timedelta(seconds=10)
    """How often the elected process refreshes the queue gauges (depth, lag)."""
    maintenance: bool = True
    """Also run the leader-elected maintenance service (retention) with the worker."""
    maintenance_every: Duration = timedelta(minutes=1)
    """How often the maintenance leader prunes by the retention settings."""
    charts: bool = True
    """Have the maintenance leader fold outcome events into the dashboard's charts every
    10 s (a few microseconds of one database session per job); off spares that work,
    and the Charts page and the overview's throughput then show nothing new."""
    retention_succeeded: Duration = timedelta(days=1)
    """How long succeeded jobs are kept after they finish."""
    retention_cancelled: Duration = timedelta(days=7)
    """How long cancelled jobs are kept after they finish."""
    retention_dead: Duration = timedelta(days=14)
    """How long dead jobs are kept after they die."""
    retention_events: Duration = timedelta(days=14)
    """How long job events are kept (a purged job's events go with it)."""
    retention_effects: Duration = timedelta(days=90)
    """How long effect-ledger rows are kept, once their job is gone (>= retention_succeeded)."""

    if not TYPE_CHECKING:  # mypy keeps the pydantic plugin's typed __init__

        def __init__(self, /, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise ConfigurationError(self._described(exc)) from exc

    @classmethod
    def _described(cls, exc: ValidationError) -> str:
        return describe_invalid("configuration", exc, known=cls.model_fields, noun="setting")

    @model_validator(mode="after")
    def _check(self) -> Config:
        for name in (
            "lease",
            "poll",
            "commit_timeout",
            "scheduler_tick",
            "periodic_renew",
            "queue_stats_every",
            "maintenance_every",
            "unrunnable_retry",
        ):
            value: timedelta = getattr(self, name)
            if value <= timedelta(0):
                raise ValueError(f"{name} must be positive, not {format_duration(value)}")
        for name in ("shutdown_grace", "claim_ahead"):  # zero: none
            value = getattr(self, name)
            if value < timedelta(0):
                raise ValueError(f"{name} must not be negative, not {format_duration(value)}")
        for name in ("heartbeat_every", "job_timeout", "reap_every"):
            maybe: timedelta | None = getattr(self, name)
            if maybe is not None and maybe <= timedelta(0):
                raise ValueError(f"{name} must be positive, not {format_duration(maybe)}")
        # Built once here so a bad pair (a retry over 100 years) is refused at once.
        UnrunnableRetry(attempts=self.unrunnable_attempts, retry=self.unrunnable_retry)
        problem = retention_problem(
            "retention_",
            succeeded=self.retention_succeeded,
            cancelled=self.retention_cancelled,
            dead=self.retention_dead,
            events=self.retention_events,
            effects=self.retention_effects,
        )
        if problem is not None:
            raise ValueError(problem)
        if self.pgbouncer and not self.database_url:
            raise ValueError(
                "pgbouncer needs database_url (the bouncer's address): the embedded "
                "server has no bouncer in front of it"
            )
        if not self.queues:
            raise ValueError("queues must name at least one queue")
        for name in self.queues:
            problem = queue_name_problem(name)
            if problem is not None:
                raise ValueError(f"queues: {problem}")
        problem = notify_channel_problem(self.notify_channel)
        if problem is not None:
            raise ValueError(problem)
        if self.heartbeat_every is not None and self.heartbeat_every > self.lease / 3:
            raise ValueError(
                f"heartbeat_every ({format_duration(self.heartbeat_every)}) must be at most a"
                f" third of the lease ({format_duration(self.lease)}), so a late heartbeat"
                " still lands before the lease expires"
            )
        return self

    @property
    def heartbeat(self) -> timedelta:
        """The heartbeat interval in effect: as set, or a third of the lease up to 10 s."""
        if self.heartbeat_every is not None:
            return self.heartbeat_every
        return min(timedelta(seconds=10), self.lease / 3)

    @property
    def unrunnable(self) -> UnrunnableRetry:
        """The retry policy of jobs the worker cannot run, as the worker takes it."""
        return UnrunnableRetry(attempts=self.unrunnable_attempts, retry=self.unrunnable_retry)

    @property
    def retention(self) -> Retention:
        """The retention settings together, as the maintenance service takes them."""
        return Retention(
            succeeded=self.retention_succeeded,
            cancelled=self.retention_cancelled,
            dead=self.retention_dead,
            events=self.retention_events,
            effects=self.retention_effects,
        )

    def environment(self) -> dict[str, str]:
        """These settings as ``JOBRUN_*`` variables that configure another process alike.

        Every setting that was given (by argument or by the environment) is
        written, so ``Config()`` in a process started with them resolves to
        equal settings; defaults are left to the other process's own.
        The URLs (``database_url``, ``direct_url``, ``read_url``) are written too: a child process
        is how they travel without showing in ``ps``.
        """
        variables: dict[str, str] = {}
        for name in sorted(self.model_fields_set):
            value = getattr(self, name)
            if value is None and name in ("database_url", "direct_url", "read_url"):
                continue  # unset is the default; every other None is written "off"
            variables[f"JOBRUN_{name.upper()}"] = _as_variable(value)
        return variables

    @classmethod
    def variable_names(cls, name: str) -> list[str]:
        """Every ``JOBRUN_*`` variable that sets the field ``name``, the canonical one first."""
        names = [f"JOBRUN_{name.upper()}"]
        for choice in getattr(cls.model_fields[name].validation_alias, "choices", ()):
            if isinstance(choice, str) and choice.startswith("JOBRUN_") and choice not in names:
                names.append(choice)
        return names

    @classmethod
    def given(cls, config: Config | None, **settings: Any) -> Config:
        """``config`` with ``settings`` over it, or the settings alone (and ``JOBRUN_*``).

        How a composition root (:class:`jobrun.Client`, :class:`jobrun.SyncClient`)
        takes its settings: a ``config``, keyword arguments, or both.
        """
        if config is None:
            return cls(**settings)
        return config.replace(**settings) if settings else config

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes``, validated like a new configuration (environment ignored)."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        values.update(changes)
        try:
            return type(self).model_validate(values)
        except ValidationError as exc:
            raise ConfigurationError(self._described(exc)) from exc
