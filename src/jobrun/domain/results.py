"""What a job's handler returned: how a handler says it, and how a client reads it back.

A handler returns a JSON value (or a pydantic model) and the worker stores
it with the job's completion, in the same statement, in ``job_results``.
:class:`Result` lets a handler return a value and a commit callback
together. :class:`StoredResult` is what the store reads back for
:meth:`jobrun.Client.result`: the job's state beside the value, so the
client can tell "not finished yet" from "finished without a value" from
"ended dead".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from jobrun.domain.jobs import JobState
from jobrun.domain.outcomes import CommitCallback

__all__ = ["DEFAULT_MAX_RESULT_BYTES", "FINISHED_CHANNEL", "Result", "StoredResult"]

DEFAULT_MAX_RESULT_BYTES = 1 << 20
"""A result above 1 MiB fails its attempt: a job queue row is not a blob store."""

FINISHED_CHANNEL = "jobrun.finished"
"""The channel a job's id is notified on when its result is stored or it ends
dead or cancelled (see ``JobRecordOutcomes``); :meth:`jobrun.Client.result` listens."""


@dataclass(frozen=True, slots=True)
class Result:
    """A handler's return value together with a commit callback.

    ``return Result({"rows": 12}, commit=write_rows)``: the callback runs in
    the completion transaction as a returned callback does, and ``value`` is
    stored in that same transaction. A handler with no callback returns the
    value itself.
    """

    value: Any
    """The JSON value (or pydantic model) to store as the job's result."""
    commit: CommitCallback | None = None
    """A commit callback or :class:`~jobrun.domain.outcomes.Effect`, or None."""


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A job's state and, once it succeeded, the value its handler returned."""

    job_id: UUID
    type: str
    """The job's type (a client picks the declared result type by it)."""
    state: JobState
    value: Any
    """The decoded JSON value; None while the job has not succeeded, or when
    its handler returned nothing."""
    error: str | None
    """The job's last error (what a dead job died of)."""
