"""Every error jobrun raises, under one root so callers can catch them all.

The hierarchy::

    JobrunError
    ├── ConfigurationError        bad settings (a heartbeat outside the lease, ...)
    │   ├── DurationError         a duration text (an option, a JOBRUN_* variable) unreadable
    │   └── UnsupportedConnection conn= is no transaction jobrun can join (says what is)
    ├── UsageError                an object used outside its life cycle (run twice, closed)
    ├── DatabaseUnavailable       the server can't be reached; names host, port, db
    │   ├── PoolExhausted         every pooled connection stayed busy past the timeout
    │   └── DatabaseFull          the server ran out of disk space; nothing was written
    ├── MigrationError            a malformed or failing migration file
    ├── SchemaMissing             the database lacks jobrun's tables: run `jobrun migrate`
    ├── InvalidJob                bad input at enqueue (payload, queue, type, policy),
    │   │                         or a malformed job id
    │   └── PayloadTooLarge
    ├── InvalidPayload            a payload does not validate against its handler's type
    ├── InvalidResult             a handler's return value does not fit its declared type
    ├── InvalidSchedule           bad cron expression, interval or time zone
    ├── JobNotFound
    ├── JobNotSucceeded           Client.result: the job ended dead or cancelled
    ├── ResultNotReady            Client.result: the job had not finished in time
    ├── ScheduleNotFound
    ├── IdempotencyConflict       same idempotency key, different job body
    ├── InvalidTransition         e.g. cancelling a job that already finished
    ├── LeaseLost                 the worker no longer owns the job it reports on
    ├── CommitTimeout             a completion ran past the commit timeout
    ├── ConfirmationNeeded        a delete not told how many jobs it deletes; nothing deleted
    ├── HandlerTimedOut           a handler run by the test kit passed its timeout
    └── UnknownJobType            no handler is registered for a claimed job

ConfigurationError, InvalidJob, InvalidSchedule and DurationError are also
ValueErrors, and UsageError a RuntimeError, so code that caught the built-in
errors these replace keeps working. Two exceptions stand outside the tree on
purpose: :class:`~jobrun.registry.Cancel` and :class:`~jobrun.registry.Snooze`
are raised by handlers to steer their job, not errors.

Errors carry plain attributes (``job_id``, ``state``, ...) besides the message,
so callers can branch without parsing text. Nothing here prints a password:
:class:`DatabaseUnavailable` is built from the parsed location, never the URL.
"""

from __future__ import annotations

from uuid import UUID

__all__ = [
    "CommitTimeout",
    "ConfigurationError",
    "ConfirmationNeeded",
    "DatabaseFull",
    "DatabaseUnavailable",
    "DurationError",
    "HandlerTimedOut",
    "IdempotencyConflict",
    "InvalidJob",
    "InvalidPayload",
    "InvalidResult",
    "InvalidSchedule",
    "InvalidTransition",
    "JobNotFound",
    "JobNotSucceeded",
    "JobrunError",
    "LeaseLost",
    "MigrationError",
    "PayloadTooLarge",
    "PoolExhausted",
    "ResultNotReady",
    "ScheduleNotFound",
    "SchemaMissing",
    "UnknownJobType",
    "UnsupportedConnection",
    "UsageError",
]


class JobrunError(Exception):
    """Root of every error jobrun raises on purpose."""


class ConfigurationError(JobrunError, ValueError):
    """Settings that cannot work together, or a setting out of range, found before anything runs.

    Also a ValueError, which is what some of these checks raised before.
    """


class UnsupportedConnection(ConfigurationError):
    """``conn=`` is not a transaction jobrun can join; the message lists what it can.

    A psycopg connection, SQLAlchemy on the psycopg driver, or Django's
    connection (see :mod:`jobrun.postgres.holders`); a closed one, another
    driver, or a framework holder in autocommit is refused.
    """


class UsageError(JobrunError, RuntimeError):
    """An object was used outside its life cycle: a closed notifier reopened, a worker run twice.

    Always a bug in the calling code. Also a RuntimeError, which these checks
    raised before.
    """


class DatabaseUnavailable(JobrunError):
    """The database could not be reached; the message names where, never the password."""

    def __init__(self, host: str, port: str, dbname: str, reason: str) -> None:
        self.host = host
        self.port = port
        self.dbname = dbname
        self.reason = reason
        super().__init__(f"cannot reach PostgreSQL at {host}:{port}, database {dbname!r}: {reason}")


class PoolExhausted(DatabaseUnavailable):
    """No pooled connection became free within the pool's timeout; the server itself is fine.

    A DatabaseUnavailable, so callers that back off and retry on an outage do the
    same here; the message says what happened instead of "cannot reach", and
    names the pool's size and timeout so the operator knows what to raise.
    """

    def __init__(self, host: str, port: str, dbname: str, max_size: int, timeout: float) -> None:
        self.host = host
        self.port = port
        self.dbname = dbname
        self.max_size = max_size
        self.timeout = timeout
        plural = "" if max_size == 1 else "s"
        self.reason = f"all {max_size} connection{plural} of the pool stayed in use"
        # Not DatabaseUnavailable's "cannot reach" message: the server is reachable.
        JobrunError.__init__(
            self,
            f"no connection was free within {timeout:g}s: all {max_size} connection{plural} "
            f"of the pool to {host}:{port}, database {dbname!r}, are in use; "
            "raise the pool size or hold connections for less time",
        )


class DatabaseFull(DatabaseUnavailable):
    """The server ran out of disk space for this statement; nothing it was writing was kept.

    A DatabaseUnavailable, so workers and callers that back off and retry on an
    outage do the same here, and resume once space is freed; the message says
    what to free instead of "cannot reach".
    """

    def __init__(self, host: str, port: str, dbname: str, reason: str) -> None:
        self.host = host
        self.port = port
        self.dbname = dbname
        self.reason = reason
        JobrunError.__init__(
            self,
            f"PostgreSQL at {host}:{port}, database {dbname!r}, is out of disk space, so "
            f"nothing was written ({reason}); free space on the server's data volume",
        )


class MigrationError(JobrunError):
    """A migration file is malformed or failed to apply; the message names the file."""


class SchemaMissing(JobrunError):
    """jobrun's schema is missing from the database, or lacks migrations this jobrun needs.

    ``pending`` lists the migration versions not applied (empty when the
    database has none of jobrun's tables). The fix is always ``jobrun migrate``.
    """

    def __init__(self, dbname: str, pending: tuple[int, ...] = ()) -> None:
        self.dbname = dbname
        self.pending = pending
        if pending:
            versions = ", ".join(str(v) for v in pending)
            what = f"out of date in database {dbname!r} (migrations {versions} not applied)"
        else:
            what = f"missing in database {dbname!r}"
        super().__init__(f"jobrun's schema is {what}: run `jobrun migrate`")


class InvalidJob(JobrunError, ValueError):
    """A job was refused (built with bad fields, or refused at enqueue); nothing was written.

    Also what a store method taking a job id raises for one that is not a UUID.

    Also a ValueError, as pydantic's own validation errors are, so code that
    caught those keeps working.
    """


class PayloadTooLarge(InvalidJob):
    """The JSON payload is larger than the configured limit."""


class InvalidPayload(JobrunError):
    """A job's payload does not validate against its handler's declared payload type.

    Raised by :meth:`jobrun.registry.Registry.new_job` on the producer side; on
    the worker side the attempt fails with this message and is retried on the
    bounded policy of :mod:`jobrun.unrunnable`.
    """

    def __init__(self, job_type: str, detail: str) -> None:
        self.job_type = job_type
        self.detail = detail
        super().__init__(f"payload of job type {job_type!r} does not validate: {detail}")


class InvalidSchedule(JobrunError, ValueError):
    """A schedule (or a change to one) is not valid: cron, interval, time zone, bounds."""


class DurationError(ConfigurationError):
    """A duration text (``90s``, ``1h30m``) that cannot be read; the message says why."""


class HandlerTimedOut(JobrunError, TimeoutError):
    """A handler ran past its timeout (the worker's executor, ``jobrun.testing.run_job``).

    Also a TimeoutError. Its message is the attempt's stored error.
    """

    def __init__(self, job_type: str, seconds: float) -> None:
        self.job_type = job_type
        self.seconds = seconds
        super().__init__(f"timed out: the attempt exceeded {seconds:g}s")


class InvalidResult(JobrunError, ValueError):
    """A handler returned a value that does not fit the result type it declared.

    The attempt fails (and is retried) as when the handler raises; nothing of
    it is stored.
    """


class JobNotSucceeded(JobrunError):
    """The job whose result was asked for ended without succeeding: dead or cancelled."""

    def __init__(self, job_id: UUID, state: str, error: str | None) -> None:
        self.job_id = job_id
        self.state = state
        self.error = error
        last = " ".join((error or "").split())
        if len(last) > 200:
            last = last[:197] + "..."
        super().__init__(f"job {job_id} ended {state}" + (f": {last}" if last else ""))


class ResultNotReady(JobrunError, TimeoutError):
    """The job whose result was asked for had not finished when the wait ran out.

    Also a TimeoutError. ``state`` is the state it was last seen in.
    """

    def __init__(self, job_id: UUID, state: str, waited: float) -> None:
        self.job_id = job_id
        self.state = state
        self.waited = waited
        after = f" after waiting {waited:g}s" if waited > 0 else ""
        super().__init__(f"job {job_id} is {state}, not finished{after}")


class JobNotFound(JobrunError):
    """No job has this id."""

    def __init__(self, job_id: UUID) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} does not exist")


class ScheduleNotFound(JobrunError):
    """No schedule has this name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"schedule {name!r} does not exist")


class IdempotencyConflict(JobrunError):
    """A job with this idempotency key exists in the queue with a different body."""

    def __init__(self, queue: str, key: str, existing_id: UUID) -> None:
        self.queue = queue
        self.key = key
        self.existing_id = existing_id
        super().__init__(
            f"idempotency key {key!r} in queue {queue!r} belongs to job {existing_id}, "
            "which has a different type, payload, priority, max_attempts or backoff"
        )


class InvalidTransition(JobrunError):
    """The job's current state does not allow the requested change."""

    def __init__(self, job_id: UUID, state: str, action: str) -> None:
        self.job_id = job_id
        self.state = state
        self.action = action
        super().__init__(f"cannot {action} job {job_id}: it is {state}")


class LeaseLost(JobrunError):
    """The caller no longer holds the job's lease: it was reaped or claimed by another owner.

    Nothing was changed; whatever the caller wrote in the same transaction was
    rolled back with it.
    """

    def __init__(self, job_id: UUID, owner: str) -> None:
        self.job_id = job_id
        self.owner = owner
        super().__init__(f"lease on job {job_id} is no longer held by {owner!r}")


class CommitTimeout(JobrunError):
    """A completion transaction ran past the store's commit timeout and was rolled back."""


class UnknownJobType(JobrunError):
    """A claimed job has a type no handler is registered for.

    The worker retries such a job on the bounded policy of
    :mod:`jobrun.unrunnable`; a producer holding the registry refuses the
    type at enqueue with :class:`InvalidJob` instead.
    """

    def __init__(self, job_type: str) -> None:
        self.job_type = job_type
        super().__init__(f"no handler is registered for job type {job_type!r}")


class ConfirmationNeeded(JobrunError):
    """A delete that was not told the number of jobs it would delete: nothing was deleted.

    ``count`` is that number; send the request again with ``confirm`` set to
    it (the dashboard's pages ask; its API answers 409 with ``"confirm": count``).
    """

    def __init__(self, count: int) -> None:
        self.count = count
        super().__init__(
            f"this deletes {count} job{'s' if count != 1 else ''} with"
            f" {'their' if count != 1 else 'its'} events and results, and cannot be undone:"
            f" send confirm={count} to go ahead"
        )
