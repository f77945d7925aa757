"""Uniqueness policies: at most one job of a kind at a time, by type and part of the payload.

``NewJob(type="sync", payload={"account": 7}, unique=Unique(by=["account"]))``
enqueues a job only when no other ``sync`` job of account 7 is queued or
running; otherwise the enqueue returns the job that is, as an idempotent
replay does. The rule is kept by the database (migration 00016): the job
holds a key, derived here from its type and the chosen payload fields, in
the states its policy names, and a partial unique index admits one holder.

Unlike an idempotency key, which the caller chooses and which stays taken
until the job is purged, a uniqueness key is derived from what the job is and
is freed when the job leaves its states.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, model_validator

from jobrun.domain.inputs import InputModel
from jobrun.domain.rules import duration_problem

__all__ = ["MAX_UNIQUE_PERIOD", "Unique", "UniqueUntil"]

MAX_UNIQUE_PERIOD = timedelta(days=366)
"""The longest period a policy may name."""


class UniqueUntil(StrEnum):
    """How long a job keeps others of its key out."""

    STARTED = "started"
    """While it is queued, before its first attempt starts (waiting for a retry
    or after a snooze no longer counts: the key is given up when a worker
    first claims the job)."""
    FINISHED = "finished"
    """While it is queued or running, retries included, until it succeeds, dies
    or is cancelled."""
    PURGED = "purged"
    """Whatever its state, until retention deletes it (with a ``period``: a key
    per period, so at most one such job per period)."""


_STATES = {
    UniqueUntil.STARTED: ("queued",),
    UniqueUntil.FINISHED: ("queued", "leased"),
    UniqueUntil.PURGED: ("queued", "leased", "succeeded", "cancelled", "dead"),
}


class Unique(InputModel):
    """A uniqueness policy: which jobs count as the same, and for how long.

    ``by`` names the payload fields that make two jobs of one type the same
    (the payload must be an object holding each of them); ``None``, the
    default, compares whole payloads, and ``[]`` compares the type alone.
    ``until`` says how long a job keeps its key (:class:`UniqueUntil`), by
    default until it finishes. ``period`` makes a key per period of that
    length (counted from the Unix epoch on the database's clock), so "once
    per hour" is ``Unique(period=timedelta(hours=1))``; with a period,
    ``until`` defaults to ``purged``. Jobs in different queues share keys.
    """

    _what: ClassVar[str] = "unique"

    model_config = ConfigDict(frozen=True)

    by: tuple[str, ...] | None = None
    until: UniqueUntil | None = None
    period: timedelta | None = Field(default=None)

    @model_validator(mode="after")
    def _check(self) -> Unique:
        if self.by is not None:
            for name in self.by:
                if not name or len(name) > 255:
                    raise ValueError(
                        f"by names payload fields of 1 to 255 characters, got {name!r}"
                    )
            if len(set(self.by)) != len(self.by):
                raise ValueError(f"by names a field twice: {list(self.by)}")
        if self.period is not None:
            problem = duration_problem("period", self.period, positive=True)
            if problem is not None:
                raise ValueError(problem)
            if not timedelta(seconds=1) <= self.period <= MAX_UNIQUE_PERIOD:
                raise ValueError("period must be from 1 second to 366 days")
        return self

    @property
    def lasts(self) -> UniqueUntil:
        """``until``, or its default: ``finished``, ``purged`` with a period."""
        if self.until is not None:
            return self.until
        return UniqueUntil.PURGED if self.period is not None else UniqueUntil.FINISHED

    def states(self) -> tuple[str, ...]:
        """The job states in which a job holds its key."""
        return _STATES[self.lasts]

    def key_base(self, job_type: str, payload: Any) -> str:
        """The key of a ``job_type`` job with ``payload``, before the period's bucket.

        Raises ValueError naming the field when ``by`` names one the payload
        lacks. A hash: the payload's part may be long, the key stays 64 characters.
        """
        if self.by is None:
            part: Any = payload
        elif not self.by:
            part = None
        else:
            if not isinstance(payload, dict):
                kind = type(payload).__name__
                raise ValueError(f"unique by {list(self.by)} needs an object payload, got {kind}")
            missing = [name for name in self.by if name not in payload]
            if missing:
                raise ValueError(
                    f"unique by {list(self.by)}: the payload has no field {missing[0]!r}"
                )
            part = {name: payload[name] for name in self.by}
        text = json.dumps(
            [job_type, self.by, part], sort_keys=True, separators=(",", ":"), ensure_ascii=True
        )
        return hashlib.sha256(text.encode()).hexdigest()
