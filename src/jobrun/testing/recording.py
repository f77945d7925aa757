"""An in-memory stand-in for the producer side of the store, for unit tests of enqueueing code.

A **test double**, never a substitute for the real store: code that enqueues
jobs (a signup view, a service method) can be tested without a database by
handing it a :class:`RecordingProducer` (or :class:`SyncRecordingProducer`
for sync code) where it would take a :class:`~jobrun.postgres.Store` (or a
:class:`~jobrun.postgres.SyncProducer`), then asserting on what it enqueued.
jobrun's own tests never use it in place of PostgreSQL, and neither should a
test of anything the store guarantees.

What it does as the real store does, through the same code (the store's
I/O-free half, ``jobrun.postgres.preparing``): every job is validated before any
is recorded (``InvalidJob``, ``PayloadTooLarge``; a ``Registry`` as on the
Client, ``payload_models`` and ``max_payload_bytes`` as on the Store);
payloads are kept as the JSON value the database would hand back; an
idempotency key is unique per queue, a replay with the same body returns the
stored job (whose id differs from the one offered) and a different body
raises ``IdempotencyConflict`` (in its slot, in a batch); a NewJob whose own
id is already stored raises ``InvalidJob``, and a batch holding one records
none of its jobs.

Where it differs, on purpose:

- No transactions. ``conn=`` is accepted and ignored: a job enqueued inside a
  transaction the code then rolls back is still recorded. Test transactional
  enqueue against the real store (the ``jobrun_store`` fixture).
- No database clock: ``now()`` and the jobs' timestamps come from ``clock``
  (the application's UTC clock by default).
- Nothing runs the jobs: they stay ``queued``. Run a handler with
  :func:`~jobrun.testing.run_job`.
- Only the producer's methods: ``now``, ``enqueue``, ``enqueue_batch``, ``enqueue_many`` and
  ``get``. It is not a :class:`~jobrun.postgres.store.Store` (code typed
  against the whole store needs a cast).
- No notifications.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Unpack
from uuid import UUID

from pydantic import BaseModel

from jobrun.domain import (
    Job,
    JobOptions,
    NewJob,
    new_job_ids,
    parse_job_id,
)
from jobrun.errors import IdempotencyConflict, InvalidJob, JobNotFound

# The real store's validation and replay rule, shared rather than copied: a
# recorder that decided differently would let tests pass that production fails.
from jobrun.postgres import preparing
from jobrun.postgres.convert import job_from_new, normal_json
from jobrun.registry import Registry

__all__ = ["RecordingProducer", "SyncRecordingProducer"]

_ANY: Any = object()
_JOB_FIELDS = frozenset(Job.model_fields)
_SHOWN = 20


def _system_clock() -> datetime:
    return datetime.now(UTC)


def _as_json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value))


class _Recorder:
    """The recording and the assertions, shared by the async and the sync producer."""

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        payload_models: Mapping[str, type[BaseModel]] | None = None,
        max_payload_bytes: int = preparing.DEFAULT_MAX_PAYLOAD_BYTES,
        clock: Callable[[], datetime] = _system_clock,
    ) -> None:
        if registry is not None and not isinstance(registry, Registry):
            raise TypeError(
                f"expected a jobrun Registry, got {type(registry).__name__}; "
                "pass payload models as payload_models={type: Model}"
            )
        # What a Client holding ``registry`` hands its store; payload_models adds or overrides.
        models = registry.payload_models() if registry is not None else {}
        self.payload_models: dict[str, type[BaseModel]] = {**models, **(payload_models or {})}
        self.job_types: frozenset[str] | None = frozenset(registry) if registry else None
        # Its handlers' declared job options, filled in as a Client fills them in.
        self._defaults = registry if registry else None
        self.max_payload_bytes = max_payload_bytes
        self.clock = clock
        self.offered: list[NewJob] = []
        """Every NewJob the code offered, in order: replays and conflicts included."""
        self._jobs: dict[UUID, Job] = {}
        self._keys: dict[tuple[str, str], Job] = {}

    @property
    def jobs(self) -> list[Job]:
        """The jobs stored, in the order they were first enqueued (replays not repeated)."""
        return list(self._jobs.values())

    def clear(self) -> None:
        """Forget everything recorded."""
        self.offered.clear()
        self._jobs.clear()
        self._keys.clear()

    def _now(self) -> datetime:
        return self.clock().astimezone(UTC)

    def _record(self, jobs: Sequence[NewJob]) -> list[Job | IdempotencyConflict]:
        if self._defaults is not None:
            jobs = [self._defaults.with_defaults(job) for job in jobs]
        prepared = preparing.prepare_jobs(
            jobs, self.payload_models, self.max_payload_bytes, self.job_types
        )
        now = self._now()
        # Kept apart until the whole call is accepted: the store's transaction
        # writes all of a batch or none of it.
        fresh: dict[UUID, Job] = {}
        fresh_keys: dict[tuple[str, str], Job] = {}
        results: list[Job | IdempotencyConflict] = []
        for item in prepared:
            new = item.job
            key = None if new.idempotency_key is None else (new.queue, new.idempotency_key)
            stored = None if key is None else fresh_keys.get(key) or self._keys.get(key)
            if stored is not None:
                try:
                    results.append(preparing.check_replay(item, stored))
                except IdempotencyConflict as conflict:
                    results.append(conflict)
                continue
            if new.id in self._jobs or new.id in fresh:
                # The store's primary key refuses it the same way.
                raise InvalidJob(f"a job with the same id is already stored: {new.id}")
            made = job_from_new(new, normal_json(item.text), preparing.run_at_of(new, now), now)
            fresh[made.id] = made
            if key is not None:
                fresh_keys[key] = made
            results.append(made)
        self.offered.extend(jobs)
        self._jobs.update(fresh)
        self._keys.update(fresh_keys)
        return results

    def _record_many(
        self, job_type: str, payloads: Iterable[Any], fields: Mapping[str, Any]
    ) -> list[UUID]:
        if self._defaults is not None:
            fields = self._defaults.options_for_many(job_type, fields)
        many = preparing.prepare_many(
            job_type, payloads, fields, self.payload_models, self.max_payload_bytes, self.job_types
        )
        now = self._now()
        run_at = preparing.run_at_of(many.template, now)
        ids = new_job_ids(len(many.texts))
        for job_id, text in zip(ids, many.texts, strict=True):
            payload = normal_json(text)
            new = many.template.model_copy(update={"id": job_id, "payload": payload})
            self.offered.append(new)
            self._jobs[job_id] = job_from_new(new, payload, run_at, now)
        return ids

    def _get(self, job_id: UUID) -> Job:
        job_id = parse_job_id(job_id)  # as the store reads it
        try:
            return self._jobs[job_id]
        except KeyError:
            raise JobNotFound(job_id) from None

    # -- assertions ------------------------------------------------------------------

    def _matching(self, job_type: str | None, payload: Any, fields: dict[str, Any]) -> list[Job]:
        unknown = set(fields) - _JOB_FIELDS
        if unknown:
            raise TypeError(f"not fields of a Job: {', '.join(sorted(unknown))}")
        wanted = _ANY if payload is _ANY else _as_json(payload)
        return [
            job
            for job in self._jobs.values()
            if (job_type is None or job.type == job_type)
            and (wanted is _ANY or job.payload == wanted)
            and all(getattr(job, name) == value for name, value in fields.items())
        ]

    def _describe(self, job_type: str | None, payload: Any, fields: dict[str, Any]) -> str:
        parts = [] if job_type is None else [f"type={job_type!r}"]
        if payload is not _ANY:
            parts.append(f"payload={_as_json(payload)!r}")
        parts += [f"{name}={value!r}" for name, value in fields.items()]
        return ", ".join(parts) or "any job"

    def _listing(self) -> str:
        if not self._jobs:
            return "nothing was enqueued"
        jobs = list(self._jobs.values())
        lines = [f"  {j.type!r} queue={j.queue!r} payload={j.payload!r}" for j in jobs[:_SHOWN]]
        if len(jobs) > _SHOWN:
            lines.append(f"  ... and {len(jobs) - _SHOWN} more")
        return "enqueued:\n" + "\n".join(lines)

    def assert_enqueued(
        self, type: str, *, payload: Any = _ANY, count: int | None = None, **fields: Any
    ) -> Job:
        """Assert that a job of ``type`` matching the criteria was enqueued; return the latest.

        ``payload`` compares as JSON (a model instance is dumped first);
        ``fields`` are other :class:`~jobrun.domain.Job` fields (``queue=``,
        ``priority=``, ``idempotency_key=``, ...) compared for equality.
        ``count`` asserts exactly that many matching jobs (at least 1; see
        :meth:`assert_not_enqueued` for none). Raises AssertionError listing
        what was enqueued.
        """
        if count is not None and count < 1:
            raise ValueError("count must be at least 1; use assert_not_enqueued for none")
        matches = self._matching(type, payload, fields)
        wanted = self._describe(type, payload, fields)
        if not matches:
            raise AssertionError(f"no job with {wanted} was enqueued; {self._listing()}")
        if count is not None and len(matches) != count:
            raise AssertionError(
                f"{len(matches)} jobs with {wanted} were enqueued, expected {count}; "
                f"{self._listing()}"
            )
        return matches[-1]

    def assert_not_enqueued(
        self, type: str | None = None, *, payload: Any = _ANY, **fields: Any
    ) -> None:
        """Assert that no job matching the criteria (any job, without any) was enqueued."""
        matches = self._matching(type, payload, fields)
        if matches:
            wanted = self._describe(type, payload, fields)
            raise AssertionError(
                f"{len(matches)} jobs with {wanted} were enqueued, expected none; {self._listing()}"
            )


class RecordingProducer(_Recorder):
    """A test double for the producer side of :class:`~jobrun.postgres.Store`; see the module.

    Records every job enqueued through it, in memory, validated and keyed as
    the real store would. ``registry`` (optional) validates jobs as a
    :class:`~jobrun.client.Client` holding that registry does: types it does
    not register are refused, payloads go through its handlers' models, and
    the job options declared with its handlers fill the fields a job left out.
    ``payload_models`` and ``max_payload_bytes`` mean what they mean on the
    Store (models given here add to the registry's); ``clock`` supplies
    "database now".
    """

    async def now(self) -> datetime:
        """The recorder's clock, in UTC (the real store reads the database's)."""
        return self._now()

    async def enqueue(self, job: NewJob, *, conn: Any | None = None) -> Job:
        """Record ``job``, or return the stored one on an idempotent replay.

        ``conn`` is ignored: there are no transactions here.
        """
        (result,) = self._record([job])
        if isinstance(result, IdempotencyConflict):
            raise result
        return result

    async def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: Any | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Record many jobs; one result per input, a conflict in its slot, as the store does."""
        return self._record(jobs)

    async def enqueue_many(
        self,
        job_type: str,
        payloads: Iterable[Any],
        *,
        conn: Any | None = None,
        **options: Unpack[JobOptions],
    ) -> list[UUID]:
        """Record one job of ``job_type`` per payload, alike in all else; their ids, in order."""
        return self._record_many(job_type, payloads, options)

    async def get(self, job_id: UUID) -> Job:
        """One recorded job by id; JobNotFound when there is none."""
        return self._get(job_id)


class SyncRecordingProducer(_Recorder):
    """A test double for :class:`~jobrun.postgres.SyncProducer`; :class:`RecordingProducer`, sync.

    Usable as a context manager like the SyncProducer it stands in for.
    """

    def now(self) -> datetime:
        """The recorder's clock, in UTC (the real store reads the database's)."""
        return self._now()

    def enqueue(self, job: NewJob, *, conn: Any | None = None) -> Job:
        """Record ``job``, or return the stored one on an idempotent replay; ``conn`` is ignored."""
        (result,) = self._record([job])
        if isinstance(result, IdempotencyConflict):
            raise result
        return result

    def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: Any | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Record many jobs; one result per input, a conflict in its slot, as the store does."""
        return self._record(jobs)

    def enqueue_many(
        self,
        job_type: str,
        payloads: Iterable[Any],
        *,
        conn: Any | None = None,
        **options: Unpack[JobOptions],
    ) -> list[UUID]:
        """Record one job of ``job_type`` per payload, alike in all else; their ids, in order."""
        return self._record_many(job_type, payloads, options)

    def get(self, job_id: UUID) -> Job:
        """One recorded job by id; JobNotFound when there is none."""
        return self._get(job_id)

    def close(self) -> None:
        """Nothing to close; here so code that closes its producer runs unchanged."""

    def __enter__(self) -> SyncRecordingProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
