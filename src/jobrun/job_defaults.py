"""Job options declared with a handler: a type's defaults for the jobs its callers leave unset.

``@registry.handler(type, queue=..., priority=..., max_attempts=...,
backoff=..., idempotency_key=...)`` declares them once, beside the handler.
Everything that builds or enqueues a job while holding the registry
(:meth:`~jobrun.registry.Registry.new_job`, a :class:`~jobrun.client.Client`
or :class:`~jobrun.sync_client.SyncClient`, ``RecordingProducer(registry)``,
``jobrun enqueue --app``) fills them into the fields its caller did not set.

The options are :class:`~jobrun.domain.NewJob` fields, checked when declared
by the rules a NewJob applies. The idempotency key is a policy instead
(:class:`IdempotencyKeyPolicy`): a key is made from each job's payload.

The per-attempt ``timeout`` is declared with the handler too, but it is not a
job field: the worker applies the handler's limit to every job of the type
(over the worker's ``job_timeout``), so there is nothing for a caller to set.

Nothing here touches the database: this module depends on the domain only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobrun.domain import NewJob, text_problem
from jobrun.errors import ConfigurationError, InvalidJob

__all__ = ["MAX_IDEMPOTENCY_KEY", "IdempotencyKeyPolicy", "declared_options", "fill_in"]

MAX_IDEMPOTENCY_KEY = 512
"""The longest idempotency key a job may carry (characters)."""

KeyFunction = Callable[[Any], "str | None"]
"""A function of a job's JSON payload that returns its idempotency key, or None for none."""


def declared_options(job_type: str, **options: Any) -> dict[str, Any]:
    """The options given (not None), each checked alone by NewJob's own rules.

    Raises :class:`~jobrun.errors.ConfigurationError` naming the option and
    the handler, so a bad default fails when the handler is declared.
    """
    defaults: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        given = {name: value}
        if name == "concurrency_limit":
            # A job's limit needs its key; a type's limit applies to whichever
            # of its jobs carry one, so it is checked beside a stand-in key.
            given["concurrency_key"] = "declared"
        try:
            checked = NewJob(type=job_type, **given)
        except InvalidJob as exc:
            reason = str(exc).removeprefix("invalid job: ")
            raise ConfigurationError(
                f"default {name} of handler {job_type!r} is invalid: {reason}"
            ) from None
        defaults[name] = getattr(checked, name)
    return defaults


class IdempotencyKeyPolicy:
    """How a job type keys the jobs enqueued without an idempotency key.

    Declared as ``idempotency_key=`` on the handler, either

    * a sequence of payload fields, ``("user_id", "day")``: the key is the job
      type, a colon, and those fields of the (JSON object) payload as compact
      JSON with sorted keys, ``mail.digest:{"day":"2024-05-01","user_id":7}``;
      when that would be longer than :data:`MAX_IDEMPOTENCY_KEY`, the type, a
      colon and the SHA-256 of the same JSON instead. A payload without one of
      the fields is refused with :class:`~jobrun.errors.InvalidJob`;
    * or a function of the JSON payload returning the key, or None for a job
      that should have none; a key that is not text of 1 to 512 characters,
      or an exception from the function, is refused with InvalidJob.

    Jobs with equal keys in one queue are one job, by the store's idempotency
    rule: the same body again returns the stored job, a different body raises
    :class:`~jobrun.errors.IdempotencyConflict`.
    """

    __slots__ = ("_function", "fields", "job_type")

    def __init__(self, job_type: str, declared: KeyFunction | Sequence[str]) -> None:
        self.job_type = job_type
        """The job type whose keys it makes."""
        self.fields: tuple[str, ...] = ()
        """The payload fields the key is made of (empty when a function makes it)."""
        self._function: KeyFunction | None = None
        if callable(declared):
            self._function = declared
            return
        if isinstance(declared, str | bytes) or not isinstance(declared, Sequence):
            raise ConfigurationError(
                f"idempotency_key of handler {job_type!r} must be a sequence of payload "
                f"fields or a function of the payload, not {type(declared).__name__}"
            )
        fields = tuple(declared)
        if not fields or not all(isinstance(f, str) and f for f in fields):
            raise ConfigurationError(
                f"idempotency_key of handler {job_type!r} must name at least one payload "
                f"field, each a non-empty string: got {declared!r}"
            )
        self.fields = tuple(dict.fromkeys(fields))

    def key_for(self, payload: Any) -> str | None:
        """The key of a job of this type with ``payload`` (its JSON value)."""
        if self._function is not None:
            return self._made_by_function(payload)
        if not isinstance(payload, Mapping):
            raise InvalidJob(
                f"job type {self.job_type!r} keys its jobs by payload fields {list(self.fields)}, "
                f"but the payload is a {type(payload).__name__}, not a JSON object"
            )
        missing = [f for f in self.fields if f not in payload]
        if missing:
            raise InvalidJob(
                f"job type {self.job_type!r} keys its jobs by payload fields "
                f"{list(self.fields)}; this payload has no {missing[0]!r}"
            )
        text = json.dumps(
            {f: payload[f] for f in self.fields},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        key = f"{self.job_type}:{text}"
        if len(key) > MAX_IDEMPOTENCY_KEY or text_problem("idempotency_key", key) is not None:
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            key = f"{self.job_type}:sha256:{digest}"
        return key

    def _made_by_function(self, payload: Any) -> str | None:
        assert self._function is not None
        try:
            key = self._function(payload)
        except Exception as exc:
            raise InvalidJob(
                f"idempotency_key of job type {self.job_type!r} failed on this payload: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if key is None:
            return None
        if not isinstance(key, str):
            raise InvalidJob(
                f"idempotency_key of job type {self.job_type!r} returned "
                f"{type(key).__name__} {key!r}, not a string or None"
            )
        problem = (
            f"it is {len(key)} characters long; keys are 1 to {MAX_IDEMPOTENCY_KEY}"
            if not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY
            else text_problem("idempotency_key", key)
        )
        if problem is not None:
            raise InvalidJob(
                f"idempotency_key of job type {self.job_type!r} made an invalid key: {problem}"
            )
        return key


def fill_in(job: NewJob, options: Mapping[str, Any], policy: IdempotencyKeyPolicy | None) -> NewJob:
    """``job`` with the declared ``options`` and key in the fields its caller did not set.

    A field counts as set when it was given to the constructor, even with the
    value it would have defaulted to (``NewJob(..., queue="default")`` keeps
    ``"default"``, ``idempotency_key=None`` keeps no key); pydantic's
    ``model_fields_set`` tells them apart. ``job`` itself comes back when
    nothing is filled in. A declared ``unique`` policy is not applied to a job
    its caller gave an idempotency key (a job takes one or the other).
    """
    given = job.model_fields_set
    update = {k: v for k, v in options.items() if k not in given}
    if policy is not None and "idempotency_key" not in given:
        key = policy.key_for(job.payload)
        if key is not None:
            update["idempotency_key"] = key
    if job.idempotency_key is not None:
        # A job its caller keyed is not also made unique by a declared policy.
        update.pop("unique", None)
    # model_copy skips validation: the options were checked when declared, the key just now.
    return job.model_copy(update=update) if update else job
