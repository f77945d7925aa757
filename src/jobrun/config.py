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
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AliasChoices, BeforeValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from jobrun._collector import DEFAULT_YOUNG_THRESHOLD
from jobrun.durations import parse_duration
from jobrun.errors import ConfigurationError
from jobrun.job import DEFAULT_NOTIFY_CHANNEL, EventMode, describe_invalid, queue_name_problem
from jobrun.maintenance import Retention, retention_problem
from jobrun.worker import DEFAULT_CLAIM_AHEAD

__all__ = ["Config", "queue_list"]

_MAX_CONCURRENCY = 10_000


def _duration(value: Any) -> Any:
    if isinstance(value, str) and value.strip() and not value.strip().isdigit():
        return parse_duration(value)
    return value


def queue_list(text: str) -> list[str]:
    """The queue names in ``text``, separated by commas, whitespace or both (``mail, default``).

    No queue name holds either separator (:func:`~jobrun.job.queue_name_problem`),
    so every list reads one way.
    """
    return text.replace(",", " ").split()


def _queues(value: Any) -> Any:
    return queue_list(value) if isinstance(value, str) else value


def _off(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("off", "none"):
        return None
    return value


Duration = Annotated[timedelta, BeforeValidator(_duration)]


class Config(BaseSettings):
    """Settings of a jobrun client and its worker, from arguments or ``JOBRUN_*`` variables.

    Arguments win over the environment; the environment wins over defaults.
    ``database_url`` left unset means the embedded PostgreSQL (the
    ``jobrun[embedded]`` extra). ``heartbeat_every`` left unset is a third of
    the lease, at most 10 s.
    """

    model_config = SettingsConfigDict(
        env_prefix="JOBRUN_", frozen=True, extra="forbid", populate_by_name=True
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
    :data:`jobrun.worker.DEFAULT_CLAIM_AHEAD`)."""
    lease: Duration = timedelta(seconds=30)
    """How long a claim holds a job without a heartbeat."""
    heartbeat_every: Duration | None = Field(
        default=None, validation_alias=AliasChoices("heartbeat_every", "JOBRUN_HEARTBEAT")
    )
    """How often running jobs' leases are extended; at most a third of the lease."""
    poll: Duration = timedelta(seconds=1)
    """How often an idle worker claims without a notification (the guarantee)."""
    job_timeout: Duration | None = None
    """Limit of one attempt, unless the handler sets its own."""
    shutdown_grace: Duration = timedelta(seconds=30)
    """How long running jobs may finish after a stop request."""
    event_mode: EventMode = EventMode.ALL
    """Which transitions are recorded in job_events (``terminal`` skips claims)."""
    scheduler: bool = False
    """Also run the leader-elected scheduler with the worker."""
    scheduler_tick: Duration = timedelta(seconds=1)
    """How often the scheduler's leader looks for due schedules."""
    notify_channel: str = Field(default=DEFAULT_NOTIFY_CHANNEL, min_length=1, max_length=63)
    """The LISTEN/NOTIFY channel; producers and workers must agree on it."""
    commit_timeout: Duration = timedelta(seconds=30)
    """Bound of a completion transaction with commit callbacks."""
    retry_jitter: float = Field(default=0.1, ge=0, le=0.5)
    """Spread of a failed job's backoff, as a fraction either way (0 turns it off)."""
    reap_every: Duration | None = timedelta(seconds=5)
    """How often the worker's reaper looks for expired leases (None: no reaper)."""
    completion_batch: int = Field(default=1000, ge=1, le=100_000)
    """Most outcomes the completer records in one batch."""
    gc_young_threshold: Annotated[int | None, BeforeValidator(_off)] = Field(
        default=DEFAULT_YOUNG_THRESHOLD, ge=1
    )
    """While a worker runs, CPython's young-generation collection threshold is raised to
    at least this many allocations (the interpreter's default, 700, had the cyclic
    collector take a sixth of a busy worker's time); put back when it stops. None
    (``JOBRUN_GC_YOUNG_THRESHOLD=off``): leave the collector alone."""
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
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
                raise ConfigurationError(describe_invalid("configuration", exc)) from exc

    @model_validator(mode="after")
    def _check(self) -> Config:
        for name in (
            "lease",
            "poll",
            "shutdown_grace",
            "commit_timeout",
            "scheduler_tick",
            "queue_stats_every",
            "maintenance_every",
        ):
            value: timedelta = getattr(self, name)
            if value < timedelta(0) or (name != "shutdown_grace" and value == timedelta(0)):
                raise ValueError(f"{name} must be positive, got {value}")
        for name in ("heartbeat_every", "job_timeout", "reap_every"):
            maybe: timedelta | None = getattr(self, name)
            if maybe is not None and maybe <= timedelta(0):
                raise ValueError(f"{name} must be positive, got {maybe}")
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
        if self.heartbeat_every is not None and self.heartbeat_every > self.lease / 3:
            raise ValueError(
                f"heartbeat_every ({self.heartbeat_every}) must be at most a third of "
                f"the lease ({self.lease})"
            )
        return self

    @property
    def heartbeat(self) -> timedelta:
        """The heartbeat interval in effect: as set, or a third of the lease up to 10 s."""
        if self.heartbeat_every is not None:
            return self.heartbeat_every
        return min(timedelta(seconds=10), self.lease / 3)

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

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes``, validated like a new configuration (environment ignored)."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        values.update(changes)
        try:
            return type(self).model_validate(values)
        except ValidationError as exc:
            raise ConfigurationError(describe_invalid("configuration", exc)) from exc
