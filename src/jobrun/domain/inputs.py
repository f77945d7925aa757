"""The base of the models users build from their own input, and their shared field checks.

A bad field of a :class:`~jobrun.domain.NewJob`, a :class:`~jobrun.domain.Backoff`
or a schedule raises jobrun's own error (:class:`~jobrun.errors.InvalidJob`,
:class:`~jobrun.errors.InvalidSchedule`) naming the field, never pydantic's.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
)

from jobrun.domain.refusals import field_label, field_problem
from jobrun.domain.rules import (
    MAX_PAYLOAD_DEPTH,
    duration_problem,
    queue_name_problem,
    text_problem,
)
from jobrun.errors import InvalidJob, JobrunError

__all__ = [
    "InputModel",
    "bounded_nesting",
    "check_every",
    "checked_queue",
    "checked_text",
    "describe_invalid",
]


def describe_invalid(
    what: str, exc: ValidationError, *, known: Iterable[str] = (), noun: str = "field"
) -> str:
    """One line naming every field pydantic refused: ``invalid job: priority must be ...``.

    ``known`` and ``noun`` are :func:`~jobrun.domain.refusals.field_problem`'s:
    the model's own field names, offered when a name given is not one of them.
    """
    known = tuple(known)
    problems = [
        field_problem(field_label(err["loc"]), err, known=known, noun=noun)
        for err in exc.errors(include_url=False)
    ]
    return f"invalid {what}: {'; '.join(problems)}"


class InputModel(BaseModel):
    """A model users build from their own input: bad fields raise jobrun's error, not pydantic's.

    The one exception tree holds at construction too: ``NewJob(priority=99999)``
    raises :class:`~jobrun.errors.InvalidJob` (still a ``ValueError``), naming the field.
    """

    model_config = ConfigDict(extra="forbid")
    """A misspelt field (``priorty=5``) is refused, never silently left at its default."""

    _invalid: ClassVar[type[JobrunError]] = InvalidJob
    _what: ClassVar[str] = "job"

    if not TYPE_CHECKING:  # mypy keeps the pydantic plugin's typed __init__

        def __init__(self, /, **data: Any) -> None:
            # What BaseModel.__init__ does, called directly: one Python frame
            # fewer per NewJob, which a batch builds a thousand of.
            try:
                self.__pydantic_validator__.validate_python(data, self_instance=self)
            except ValidationError as exc:
                raise self._invalid(
                    describe_invalid(self._what, exc, known=type(self).model_fields)
                ) from exc


def bounded_nesting(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate a JSON payload, turning pydantic's own depth guard into our limit's message.

    pydantic refuses a value nested a few hundred levels deep with one
    location segment per level; the limit itself is enforced when the store
    encodes the payload (:func:`~jobrun.domain.rules.payload_problem`).
    """
    try:
        return handler(value)
    except ValidationError as exc:
        if any(err["type"] == "recursion_depth_exceeded" for err in exc.errors()):
            raise ValueError(
                f"payload is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
            ) from None
        raise


def checked_text(value: str | None, info: ValidationInfo) -> str | None:
    """A text field's validator: ``value``, or ValueError when a text column refuses it."""
    if value is not None:
        problem = text_problem(info.field_name or "text", value)
        if problem is not None:
            raise ValueError(problem)
    return value


def checked_queue(value: str | None) -> str | None:
    """A queue field's validator: ``value`` unchanged, or ValueError when no queue may bear it."""
    if value is not None:
        problem = queue_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
    return value


MIN_EVERY = timedelta(seconds=1)
"""The shortest interval a schedule may have: the scheduler's leader looks for
due schedules once a tick (``scheduler_tick``, a second by default) and fires
a schedule that fell behind once, not once per missed run, so a shorter
interval would still fire once a tick while saying otherwise."""


def check_every(every: timedelta | None) -> None:
    """Raise ValueError when a schedule's interval ``every`` is under a second or too long."""
    if every is not None:
        problem = duration_problem("every", every, positive=True)
        if problem is None and every < MIN_EVERY:
            # Under a second, as the duration text users type (250ms).
            problem = f"every must be at least 1s, not {every.total_seconds() * 1000:g}ms"
        if problem is not None:
            raise ValueError(problem)
