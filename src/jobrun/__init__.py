"""jobrun: a durable job queue for Python services, on PostgreSQL.

Start with :class:`Client` (one :class:`Config`): it opens the pool and the
store and runs workers. The names exported here are that, the domain, what a
handler uses (Registry, JobContext, Cancel, Snooze) and the errors; the
PostgreSQL store lives in :mod:`jobrun.postgres`, the ports in
:mod:`jobrun.ports` and the runtime in :mod:`jobrun.worker` and
:mod:`jobrun.scheduler`.
"""

from jobrun.client import Client
from jobrun.config import Config
from jobrun.errors import (
    CommitTimeout,
    ConfigurationError,
    DatabaseUnavailable,
    DurationError,
    IdempotencyConflict,
    InvalidJob,
    InvalidPayload,
    InvalidSchedule,
    InvalidTransition,
    JobNotFound,
    JobrunError,
    LeaseLost,
    MigrationError,
    PayloadTooLarge,
    PoolExhausted,
    ScheduleNotFound,
    SchemaMissing,
    UnknownJobType,
    UsageError,
)
from jobrun.job import (
    Backoff,
    BackoffKind,
    CommitCallback,
    Completion,
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
    QueueDepth,
    Schedule,
    SchedulePatch,
    SyncCommitCallback,
    SyncCompletion,
    SyncOutcome,
)
from jobrun.registry import Cancel, JobContext, Registry, Snooze

__all__ = [
    "Backoff",
    "BackoffKind",
    "Cancel",
    "Client",
    "CommitCallback",
    "CommitTimeout",
    "Completion",
    "Config",
    "ConfigurationError",
    "DatabaseUnavailable",
    "DurationError",
    "Event",
    "EventMode",
    "IdempotencyConflict",
    "InvalidJob",
    "InvalidPayload",
    "InvalidSchedule",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobFilter",
    "JobNotFound",
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
    "QueueDepth",
    "Registry",
    "Schedule",
    "ScheduleNotFound",
    "SchedulePatch",
    "SchemaMissing",
    "Snooze",
    "SyncCommitCallback",
    "SyncCompletion",
    "SyncOutcome",
    "UnknownJobType",
    "UsageError",
]
