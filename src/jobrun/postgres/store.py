"""The PostgreSQL Store: every job transition of the contract, one transaction each.

Transactions open only here, through :meth:`Store._with_tx`. A transition that
fits in one statement (claim, heartbeat, fail, the plain completion, cancel's
two halves) is written as one statement whose data-modifying CTEs also record
its events, so it is one round trip on an autocommit connection and its event
can never be lost or orphaned. Multi-statement transitions:

* enqueue: one statement inserts the job (+ event) and calls ``pg_notify``;
  on the pool it runs alone on an autocommit connection (one round trip, no
  BEGIN/COMMIT), on a caller's connection inside their transaction. An
  idempotency replay inserts nothing and is followed by a re-read. PostgreSQL
  delivers the notification at commit, so no listener wakes before the job
  is visible. On the pool, a job due now may instead be handed off in the
  same statement: leased to an idle worker's offer (+ its claimed event) and
  sent whole on that worker's channel (see :class:`~jobrun.domain.HandoffOffer`).
* enqueue_batch: db now, COPY jobs, keyed jobs by one ``INSERT .. ON CONFLICT``,
  COPY events, one notification per queue.
* complete with a commit callback: statement timeout, the owner-guarded finish
  (+ events), which also locks the rows the owner still holds, ledger rows
  of the jobs it left succeeded (a requested cancel wins and skips the effect),
  their callbacks (the group's :class:`~jobrun.domain.Effect` s as one
  ``executemany`` per SQL text). A lost lease or any error rolls the
  callbacks' writes back with everything else.
  The whole transaction is bounded in wall time by ``commit_timeout``
  (:class:`~jobrun.postgres.deadlines.CommitDeadline`): in the async store a
  callback still waiting on something when it runs out is cancelled, the
  transaction rolls back and the job's result is CommitTimeout. The sync twin
  cannot interrupt a thread: it rolls back when the late callback returns,
  and holds the row lock until then (see
  :class:`~jobrun.postgres.deadlines.SyncCommitDeadline`).
* reap: lock expired leases with SKIP LOCKED, verdicts from each job's own
  policy, one batched update (+ events).

Times passed in are database time as read by the caller (``await store.now()``).
"""

from __future__ import annotations

from jobrun.postgres.bulk_enqueueing import BulkEnqueueMethods
from jobrun.postgres.completing import CompletionMethods
from jobrun.postgres.job_admin import JobAdminMethods
from jobrun.postgres.leasing import LeaseMethods
from jobrun.postgres.presence import PresenceMethods
from jobrun.postgres.pruning import PruningMethods
from jobrun.postgres.queue_controls import QueueControlMethods
from jobrun.postgres.schedules import ScheduleMethods
from jobrun.postgres.stats import StatsMethods
from jobrun.postgres.store_core import DEFAULT_NOTIFY_CHANNEL

__all__ = ["DEFAULT_NOTIFY_CHANNEL", "Store"]


class Store(
    BulkEnqueueMethods,
    LeaseMethods,
    CompletionMethods,
    JobAdminMethods,
    QueueControlMethods,
    PruningMethods,
    ScheduleMethods,
    PresenceMethods,
    StatsMethods,
):
    """jobrun's Store port on a psycopg async pool.

    ``event_mode`` chooses which transitions are recorded (claims are skipped
    in ``terminal`` mode); ``commit_timeout`` bounds a completion transaction
    with commit callbacks, each statement on the server and the whole
    transaction in wall time (see :meth:`record_outcomes`); ``retry_jitter``
    spreads a failed job's backoff by up to that fraction either way (0 turns
    it off; at most 0.5);
    ``notify_channel`` is the LISTEN/NOTIFY channel; ``payload_models``
    validates the payload of the named job types at enqueue; ``job_types``,
    when given (a :class:`~jobrun.client.Client` gives its registry's), are
    the only types it enqueues: any other is refused with InvalidJob naming
    them, as no worker of the application could run it; ``observer``
    (:class:`~jobrun.telemetry.hooks.Observer`) is told of every job enqueued;
    ``gc_young_threshold`` raises the cyclic collector's young threshold to at
    least that while a batch is enqueued (see :mod:`jobrun._gc_tuning`; a
    client gives its config's). When
    ``opentelemetry-api`` is installed and a span is current, enqueue writes
    its trace context to the job's ``meta`` (:mod:`jobrun.telemetry.tracing`).
    """
