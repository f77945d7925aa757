"""The domain of jobrun: jobs, queues, schedules and outcomes, and their rules, as plain data.

Nothing here does I/O, speaks SQL or imports psycopg. The ports the runtime
consumes are in :mod:`jobrun.ports`; the PostgreSQL package
(:mod:`jobrun.postgres`) implements them. Keeping that line sharp is what lets
the contract be tested in one place. One module per concept, lowest first:

- :mod:`~jobrun.domain.rules`: the limits and the ``*_problem`` checks that
  apply them, shared by every entry point;
- :mod:`~jobrun.domain.ids`: time-ordered job ids and application lock ids;
- :mod:`~jobrun.domain.inputs`: the base of the models users build, which
  raise jobrun's own error naming the field;
- :mod:`~jobrun.domain.backoff`: a job's retry policy;
- :mod:`~jobrun.domain.jobs`: a job to enqueue, a stored job, its events, the
  options jobs enqueued alike share (:class:`JobOptions`), and listings;
- :mod:`~jobrun.domain.queues`, :mod:`~jobrun.domain.schedules` (with the
  periodic jobs declared in code and how they are written),
  :mod:`~jobrun.domain.outcomes`, :mod:`~jobrun.domain.handoff`;
- :mod:`~jobrun.domain.search`: searching the jobs listing (id prefix or
  suffix, error text, payload containment), bounded per call;
- :mod:`~jobrun.domain.replicas`: a read replica's lag;
- :mod:`~jobrun.domain.progress`: a running job's progress;
- :mod:`~jobrun.domain.json_text`: the JSON text jsonb stores, checked the
  same way for payloads and results; :mod:`~jobrun.domain.results`: what a
  job's handler returned, as a client reads it;
- :mod:`~jobrun.domain.uniqueness`: uniqueness policies (one job of a kind at a time);
- :mod:`~jobrun.domain.workers`: the worker processes that are alive;
- :mod:`~jobrun.domain.stats`: what the charts show, attempts ended per
  minute and histograms of queue wait and run time;
- :mod:`~jobrun.domain.workflows`: jobs linked by dependencies (groups with
  a callback, chains) and the graph they form.

This package's namespace is the domain's face: every name above is importable
from ``jobrun.domain``. The errors have their own home, :mod:`jobrun.errors`.
"""

from __future__ import annotations

from jobrun.domain.backoff import DEFAULT_BACKOFF, Backoff, BackoffKind
from jobrun.domain.handoff import HANDOFF_CONFIRM_WITHIN, HandoffOffer, WorkerOffer
from jobrun.domain.ids import key_lock_id, new_job_id, new_job_ids, parse_job_id
from jobrun.domain.inputs import describe_invalid
from jobrun.domain.jobs import (
    MAX_DEPENDENCIES,
    Event,
    EventMode,
    Job,
    JobFilter,
    JobOptions,
    JobPage,
    JobState,
    NewJob,
    jobs_alike,
    new_job_problem,
)
from jobrun.domain.json_text import encode_payload
from jobrun.domain.outcomes import (
    CommitCallback,
    Effect,
    Outcome,
    OutcomeKind,
    SyncCommitCallback,
    SyncOutcome,
)
from jobrun.domain.progress import MAX_PROGRESS_MESSAGE, JobProgress, progress_report
from jobrun.domain.queues import (
    MAX_QUEUE_LIMIT,
    QueueControls,
    QueueDepth,
    QueueInfo,
    QueueStats,
    StateCounts,
    queue_limits_problem,
)
from jobrun.domain.replicas import ReplicaLag
from jobrun.domain.results import (
    DEFAULT_MAX_RESULT_BYTES,
    FINISHED_CHANNEL,
    Result,
    StoredResult,
)
from jobrun.domain.rules import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_NOTIFY_CHANNEL,
    DEFAULT_QUEUE,
    MAX_ATTEMPTS_LIMIT,
    MAX_CONCURRENCY_LIMIT,
    MAX_DELAY,
    MAX_PAYLOAD_DEPTH,
    MAX_PRIORITY,
    MAX_QUEUE_NAME,
    MIN_PRIORITY,
    NOTIFY_CHANNEL_MAX_BYTES,
    RUN_AT_FLOOR,
    RUN_AT_LIMIT,
    duration_problem,
    notify_channel_problem,
    payload_problem,
    queue_name_problem,
    storable_text,
    text_problem,
)
from jobrun.domain.schedules import (
    DEFAULT_DECLARED_GROUP,
    REMOVED_FROM_CODE,
    DeclaredSet,
    DeclaredWrite,
    NewSchedule,
    Reconciliation,
    Schedule,
    SchedulePatch,
    declaration_digest,
    declared_edit_problem,
    reconcile_declared,
)
from jobrun.domain.search import (
    INDEXED_STATES,
    MAX_SEARCH_TEXT,
    SEARCH_ROWS,
    error_search,
    id_digits,
    id_range,
    payload_search,
    split_id_search,
)
from jobrun.domain.stats import (
    HISTOGRAM_BUCKETS,
    Histogram,
    OutcomeCounts,
    StatsPoint,
    StatsWindow,
    TypeStats,
    bucket_upper_ms,
)
from jobrun.domain.uniqueness import MAX_UNIQUE_PERIOD, Unique, UniqueUntil
from jobrun.domain.workers import MAX_REPORTED_RUNNING, RunningJob, WorkerInfo, WorkerReport
from jobrun.domain.workflows import (
    MAX_WORKFLOW_STEPS,
    Dependency,
    Workflow,
    WorkflowEdge,
    WorkflowStep,
    chain,
    group,
)

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_DECLARED_GROUP",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_NOTIFY_CHANNEL",
    "DEFAULT_QUEUE",
    "FINISHED_CHANNEL",
    "HANDOFF_CONFIRM_WITHIN",
    "HISTOGRAM_BUCKETS",
    "INDEXED_STATES",
    "MAX_ATTEMPTS_LIMIT",
    "MAX_CONCURRENCY_LIMIT",
    "MAX_DELAY",
    "MAX_DEPENDENCIES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_PRIORITY",
    "MAX_PROGRESS_MESSAGE",
    "MAX_QUEUE_LIMIT",
    "MAX_QUEUE_NAME",
    "MAX_REPORTED_RUNNING",
    "MAX_SEARCH_TEXT",
    "MAX_UNIQUE_PERIOD",
    "MAX_WORKFLOW_STEPS",
    "MIN_PRIORITY",
    "NOTIFY_CHANNEL_MAX_BYTES",
    "REMOVED_FROM_CODE",
    "RUN_AT_FLOOR",
    "RUN_AT_LIMIT",
    "SEARCH_ROWS",
    "Backoff",
    "BackoffKind",
    "CommitCallback",
    "DeclaredSet",
    "DeclaredWrite",
    "Dependency",
    "Effect",
    "Event",
    "EventMode",
    "HandoffOffer",
    "Histogram",
    "Job",
    "JobFilter",
    "JobOptions",
    "JobPage",
    "JobProgress",
    "JobState",
    "NewJob",
    "NewSchedule",
    "Outcome",
    "OutcomeCounts",
    "OutcomeKind",
    "QueueControls",
    "QueueDepth",
    "QueueInfo",
    "QueueStats",
    "Reconciliation",
    "ReplicaLag",
    "Result",
    "RunningJob",
    "Schedule",
    "SchedulePatch",
    "StateCounts",
    "StatsPoint",
    "StatsWindow",
    "StoredResult",
    "SyncCommitCallback",
    "SyncOutcome",
    "TypeStats",
    "Unique",
    "UniqueUntil",
    "WorkerInfo",
    "WorkerOffer",
    "WorkerReport",
    "Workflow",
    "WorkflowEdge",
    "WorkflowStep",
    "bucket_upper_ms",
    "chain",
    "declaration_digest",
    "declared_edit_problem",
    "describe_invalid",
    "duration_problem",
    "encode_payload",
    "error_search",
    "group",
    "id_digits",
    "id_range",
    "jobs_alike",
    "key_lock_id",
    "new_job_id",
    "new_job_ids",
    "new_job_problem",
    "notify_channel_problem",
    "parse_job_id",
    "payload_problem",
    "payload_search",
    "progress_report",
    "queue_limits_problem",
    "queue_name_problem",
    "reconcile_declared",
    "split_id_search",
    "storable_text",
    "text_problem",
]
