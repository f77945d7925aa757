"""Schedules: a job template the scheduler fires on a cron expression or a fixed interval."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar

from pydantic import BaseModel, Field, JsonValue, ValidationInfo, field_validator, model_validator

from jobrun.domain.inputs import (
    InputModel,
    bounded_nesting,
    check_every,
    checked_queue,
    checked_text,
)
from jobrun.domain.rules import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    MAX_ATTEMPTS_LIMIT,
    MAX_PRIORITY,
    MIN_PRIORITY,
)
from jobrun.errors import InvalidSchedule, JobrunError

__all__ = ["NewSchedule", "Schedule", "SchedulePatch"]


class NewSchedule(InputModel):
    """A schedule to create: a job template fired on a cron expression or a fixed interval."""

    _invalid: ClassVar[type[JobrunError]] = InvalidSchedule
    _what: ClassVar[str] = "schedule"

    name: str = Field(min_length=1, max_length=255)
    type: str = Field(min_length=1, max_length=255)
    payload: JsonValue = Field(default_factory=dict)
    queue: str = Field(default=DEFAULT_QUEUE, min_length=1, max_length=128)
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=MAX_ATTEMPTS_LIMIT)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"

    _payload = field_validator("payload", mode="wrap")(bounded_nesting)
    _queue = field_validator("queue")(checked_queue)

    @field_validator("name", "type", "cron", "timezone")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        return checked_text(value, info)

    @model_validator(mode="after")
    def _one_trigger(self) -> NewSchedule:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of cron and every")
        check_every(self.every)
        return self


class SchedulePatch(InputModel):
    """Fields of a schedule to change; ``None`` leaves a field as it is."""

    _invalid: ClassVar[type[JobrunError]] = InvalidSchedule
    _what: ClassVar[str] = "schedule change"

    type: str | None = Field(default=None, min_length=1, max_length=255)
    payload: JsonValue | None = None
    queue: str | None = Field(default=None, min_length=1, max_length=128)
    priority: int | None = Field(default=None, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    max_attempts: int | None = Field(default=None, ge=1, le=MAX_ATTEMPTS_LIMIT)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str | None = None

    _payload = field_validator("payload", mode="wrap")(bounded_nesting)
    _queue = field_validator("queue")(checked_queue)

    @field_validator("type", "cron", "timezone")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        return checked_text(value, info)

    @model_validator(mode="after")
    def _check(self) -> SchedulePatch:
        check_every(self.every)
        return self


class Schedule(BaseModel):
    """A stored schedule; ``changed_by`` names who last paused or resumed it, if anyone said."""

    id: int
    name: str
    type: str
    queue: str
    payload: JsonValue
    priority: int
    max_attempts: int
    cron: str | None
    every: timedelta | None
    timezone: str
    next_run_at: datetime
    last_run_at: datetime | None
    paused: bool
    created_at: datetime
    updated_at: datetime
    changed_by: str | None = None
