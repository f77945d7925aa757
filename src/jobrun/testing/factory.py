"""Jobs built in memory, as a worker or a producer would see them, for tests.

A test of a handler needs a :class:`~jobrun.domain.Job` without a database: one
that looks claimed (leased, first attempt), with every field filled in
sensibly, any of which the test can override. The timestamps come from the
application's clock: there is no database to ask, and nothing in a handler
should compare them with the real clock anyway.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from jobrun.domain import Backoff, Job, JobState, NewJob, new_job_id

__all__ = ["DEFAULT_LEASE", "TEST_OWNER", "make_job"]

TEST_OWNER = "jobrun.testing"
"""The lease owner of jobs made by :func:`make_job`."""
DEFAULT_LEASE = timedelta(seconds=30)
"""How long the lease of a job made by :func:`make_job` runs (the worker's default)."""

_FINISHED = {JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED}


def _json_value(payload: Any) -> Any:
    # What PostgreSQL's jsonb hands back: tuples become lists, keys strings, ...
    return json.loads(json.dumps(payload, allow_nan=False))


def make_job(source: NewJob | None = None, /, **overrides: Any) -> Job:
    """A :class:`~jobrun.domain.Job` as a worker sees it after a claim, with ``overrides`` applied.

    By default: type ``"test"``, payload ``{}``, queue ``default``, state
    ``leased`` by :data:`TEST_OWNER` for :data:`DEFAULT_LEASE`, attempt 1 of
    25. Given a :class:`~jobrun.domain.NewJob`, its id, type, payload, queue,
    priority, attempts, backoff, idempotency key and due time are taken from
    it. ``overrides`` are any :class:`Job` fields; when ``state`` is not
    ``leased`` the lease fields default to empty (and ``attempts`` to 0 for a
    queued job). The result is validated like any Job: a wrong field raises
    pydantic's ``ValidationError``.
    """
    now = datetime.now(UTC)
    state = JobState(overrides.get("state", JobState.LEASED))
    leased = state is JobState.LEASED
    values: dict[str, Any] = {
        "id": new_job_id(),
        "queue": "default",
        "type": "test",
        "payload": {},
        "priority": 0,
        "state": state,
        "attempts": 0 if state is JobState.QUEUED else 1,
        "max_attempts": 25,
        "backoff": Backoff(),
        "run_at": now,
        "lease_owner": TEST_OWNER if leased else None,
        "lease_expires_at": now + DEFAULT_LEASE if leased else None,
        "cancel_requested": False,
        "idempotency_key": None,
        "last_error": None,
        "created_at": now,
        "updated_at": now,
        "finished_at": now if state in _FINISHED else None,
    }
    if source is not None:
        values.update(
            id=source.id,
            queue=source.queue,
            type=source.type,
            payload=source.payload,
            priority=source.priority,
            max_attempts=source.max_attempts,
            backoff=source.backoff,
            idempotency_key=source.idempotency_key,
        )
        if source.run_at is not None:
            values["run_at"] = source.run_at.astimezone(UTC)
        elif source.delay is not None:
            values["run_at"] = now + source.delay
    values.update(overrides)
    values["payload"] = _json_value(values["payload"])
    return Job.model_validate(values)
