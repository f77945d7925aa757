"""jobrun: a durable job queue for Python services, on PostgreSQL.

The names exported here are the domain and the errors; the PostgreSQL store
lives in :mod:`jobrun.postgres` and the runtime in :mod:`jobrun.worker` and
:mod:`jobrun.scheduler`.
"""

from jobrun.errors import (
    CommitTimeout,
    ConfigurationError,
    DatabaseUnavailable,
    IdempotencyConflict,
    InvalidJob,
    InvalidSchedule,
    InvalidTransition,
    JobNotFound,
    JobrunError,
    LeaseLost,
    MigrationError,
    PayloadTooLarge,
    PoolExhausted,
    ScheduleNotFound,
    UnknownJobType,
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
    QueueDepth,
    Schedule,
    SchedulePatch,
)

__all__ = [
    "Backoff",
    "BackoffKind",
    "CommitCallback",
    "CommitTimeout",
    "Completion",
    "ConfigurationError",
    "DatabaseUnavailable",
    "Event",
    "EventMode",
    "IdempotencyConflict",
    "InvalidJob",
    "InvalidSchedule",
    "InvalidTransition",
    "Job",
    "JobFilter",
    "JobNotFound",
    "JobPage",
    "JobState",
    "JobrunError",
    "LeaseLost",
    "MigrationError",
    "NewJob",
    "NewSchedule",
    "PayloadTooLarge",
    "PoolExhausted",
    "QueueDepth",
    "Schedule",
    "ScheduleNotFound",
    "SchedulePatch",
    "UnknownJobType",
]
