"""How an attempt ended, and the effect a handler commits with its job's completion.

The worker's executor turns each attempt into an :class:`Outcome` (or a
:class:`SyncOutcome` for the synchronous store); the completer hands them to
the store in batches, which records each in the completion transaction along
with its commit callback or :class:`Effect`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from jobrun.domain.jobs import Job

__all__ = [
    "CommitCallback",
    "Effect",
    "Outcome",
    "OutcomeKind",
    "SyncCommitCallback",
    "SyncOutcome",
]


CommitCallback = Callable[[Any], Awaitable[None]]
"""A handler's effect, run inside the completion transaction.

It receives the transaction's connection (a ``psycopg.AsyncConnection``) and
writes through it; those writes commit with the job's completion or not at
all. The port types it loosely so the runtime never imports psycopg.

A callback must be safe to call again: completions are committed in groups,
and when one callback of a group fails the group is rolled back and the
others are run again in a transaction without it. Their database writes
commit once, whatever happens, but any other side effect of the callback's
Python code (a log line, a counter, a call to another service) may happen
twice. Keep callbacks to database writes; do anything else in the handler.
"""


@dataclass(frozen=True, slots=True)
class Effect:
    """A commit callback that is one SQL statement: what most effects are.

    ``return Effect("INSERT INTO sent (job_id) VALUES (%s)", (ctx.job.id,))``
    from a handler does what a callback running that statement does, with
    the same guarantees: the statement runs in the completion transaction
    after the ledger row is written, is skipped when the job's effect already
    committed, and rolls back with everything else. Because the store sees
    the statement instead of a function, the Effects of one completion batch
    that share their SQL text go to the server as one ``executemany`` (one
    pipelined batch) after the batch's function callbacks, instead of a
    statement call per job: the exactly-once path at a fraction of the cost.
    ``params`` are psycopg's (a sequence for ``%s``, a mapping for
    ``%(name)s``).
    """

    sql: str
    """The statement, with psycopg placeholders."""
    params: Sequence[Any] | Mapping[str, Any] | None = None
    """Its parameters."""

    async def __call__(self, conn: Any) -> None:
        """Run the statement on ``conn`` (as a plain commit callback would)."""
        await conn.execute(self.sql, self.params)


class OutcomeKind(StrEnum):
    """How an attempt ended, as the worker reports it to the store.

    Where each kind takes the job is decided in one place, the database's
    ``job_outcome_state`` (migration 00003); a requested cancel always wins.
    """

    COMPLETE = "complete"
    """The handler returned: succeeded, its commit callback (if any) committed.

    A cancel requested before the completion still wins: the job ends
    cancelled and its commit callback is not run.
    """
    FAIL = "fail"
    """The attempt failed: queued again after the job's backoff, or dead."""
    RELEASE = "release"
    """Handed back unfinished (shutdown): queued, due now, the attempt not counted."""
    SNOOZE = "snooze"
    """The handler asked to run later (``raise Snooze``): queued after ``delay``,
    the attempt not counted."""
    CANCEL = "cancel"
    """The handler ended its own job (``raise Cancel``): cancelled now."""


@dataclass(slots=True)
class Outcome:
    """One attempt's outcome, recorded by the store in a batch with others.

    A plain dataclass, not a pydantic model: the worker builds one per job on
    the hot path, and the Job inside is already valid. ``job`` is the job as
    it was claimed: its attempt number is part of the lease fence. ``detail``
    is the error or reason ("" keeps the job's last error); ``delay`` is a
    snooze's wait. ``max_attempts`` bounds a failure below the job's own
    ``max_attempts`` and makes ``delay`` its wait instead of the job's
    backoff: the worker's policy for a job it cannot run (see
    :class:`jobrun.unrunnable.UnrunnableRetry`). The store counts in
    ``invocations`` how often it called ``commit``: more than once means a
    group commit was rolled back and the callback ran again (see
    :data:`CommitCallback`).
    """

    job: Job
    kind: OutcomeKind = OutcomeKind.COMPLETE
    commit: CommitCallback | None = None
    detail: str = ""
    delay: timedelta = timedelta(0)
    invocations: int = 0
    lock_keys: tuple[str, ...] = ()
    """Application keys the commit callback needs held (``ctx.lock``): the store
    takes them, in one global order, before any callback of the group runs."""
    max_attempts: int | None = None
    """A failure's own attempt limit (with ``delay`` its wait); None: the job's."""
    result: str | None = None
    """What the handler returned, as checked JSON text (completions only): stored
    with the completion when the job succeeds; None when it returned nothing."""


SyncCommitCallback = Callable[[Any], None]
"""A commit callback for the synchronous store (:class:`jobrun.postgres.SyncStore`).

The same contract as :data:`CommitCallback`, called with a sync
``psycopg.Connection`` and returning nothing.
"""


@dataclass(slots=True)
class SyncOutcome:
    """One attempt's outcome for the synchronous store; see :class:`Outcome`."""

    job: Job
    kind: OutcomeKind = OutcomeKind.COMPLETE
    commit: SyncCommitCallback | None = None
    detail: str = ""
    delay: timedelta = timedelta(0)
    invocations: int = 0
    lock_keys: tuple[str, ...] = ()
    max_attempts: int | None = None
    result: str | None = None
