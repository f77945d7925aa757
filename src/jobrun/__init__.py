"""jobrun: a durable job queue for Python services, on PostgreSQL.

Start with :class:`Client` (one :class:`Config`): it opens the pool and the
store and runs workers; :class:`SyncClient` is its producing half for
synchronous code, from the same ``Config``. The names exported here are that, the domain, what a
handler uses (Registry, JobContext, Cancel, Snooze, Result) and the errors; the
PostgreSQL store lives in :mod:`jobrun.postgres`, the ports in
:mod:`jobrun.ports` and the runtime in :mod:`jobrun.worker` and
:mod:`jobrun.scheduler`.
"""

from jobrun._version import version as _version
from jobrun.client import Client
from jobrun.config import Config
from jobrun.domain import (
    Backoff,
    BackoffKind,
    CommitCallback,
    Effect,
    Event,
    EventMode,
    Job,
    JobFilter,
    JobPage,
    JobState,
    NewJob,
    NewSchedule,
    Outcome,
    OutcomeKind,
    QueueControls,
    QueueDepth,
    QueueInfo,
    Result,
    Schedule,
    SchedulePatch,
    SyncCommitCallback,
    SyncOutcome,
    Unique,
    UniqueUntil,
)
from jobrun.errors import (
    CommitTimeout,
    ConfigurationError,
    ConfirmationNeeded,
    DatabaseFull,
    DatabaseUnavailable,
    DurationError,
    HandlerTimedOut,
    IdempotencyConflict,
    InvalidJob,
    InvalidPayload,
    InvalidResult,
    InvalidSchedule,
    InvalidTransition,
    JobNotFound,
    JobNotSucceeded,
    JobrunError,
    LeaseLost,
    MigrationError,
    PayloadTooLarge,
    PoolExhausted,
    ResultNotReady,
    ScheduleNotFound,
    SchemaMissing,
    UnknownJobType,
    UnsupportedConnection,
    UsageError,
)
from jobrun.registry import Cancel, JobContext, Registry, Snooze
from jobrun.sync_client import SyncClient

__version__: str = _version()
"""The installed package's version (``[project] version`` in pyproject.toml)."""

__all__ = [
    "Backoff",
    "BackoffKind",
    "Cancel",
    "Client",
    "CommitCallback",
    "CommitTimeout",
    "Config",
    "ConfigurationError",
    "ConfirmationNeeded",
    "DatabaseFull",
    "DatabaseUnavailable",
    "DurationError",
    "Effect",
    "Event",
    "EventMode",
    "HandlerTimedOut",
    "IdempotencyConflict",
    "InvalidJob",
    "InvalidPayload",
    "InvalidResult",
    "InvalidSchedule",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobFilter",
    "JobNotFound",
    "JobNotSucceeded",
    "JobPage",
    "JobState",
    "JobrunError",
    "LeaseLost",
    "MigrationError",
    "NewJob",
    "NewSchedule",
    "Outcome",
    "OutcomeKind",
    "PayloadTooLarge",
    "PoolExhausted",
    "QueueControls",
    "QueueDepth",
    "QueueInfo",
    "Registry",
    "Result",
    "ResultNotReady",
    "Schedule",
    "ScheduleNotFound",
    "SchedulePatch",
    "SchemaMissing",
    "Snooze",
    "SyncClient",
    "SyncCommitCallback",
    "SyncOutcome",
    "Unique",
    "UniqueUntil",
    "UnknownJobType",
    "UnsupportedConnection",
    "UsageError",
]
