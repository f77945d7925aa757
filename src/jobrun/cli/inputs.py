"""Option and argument texts checked before the database is touched.

Each reader turns one piece of user input (a duration, JSON, a job id, a state)
into a value, or prints one ``error: ...`` line naming the option and exits
with code 2 (:func:`jobrun.cli.app.fail`), so a bad argument writes nothing.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from uuid import UUID

import typer
from pydantic import ValidationError

from jobrun.cli.app import fail
from jobrun.cli.durations import DurationError, parse_duration
from jobrun.domain import MAX_PAYLOAD_DEPTH, JobState, describe_invalid

__all__ = ["read_duration", "read_job_id", "read_json", "read_state", "validation_exit"]


def read_duration(option: str, text: str) -> timedelta:
    """:func:`parse_duration` of ``text``, or exit 2 naming ``option``."""
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise fail(f"{option}: {exc}") from None


def read_json(option: str, text: str) -> Any:
    """The JSON value in ``text``, or exit 2 naming ``option``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{option} is not valid JSON: {exc}") from None
    except RecursionError:
        # The parser recurses per level; a payload this deep is refused anyway.
        raise fail(
            f"{option}: payload is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
        ) from None


def read_job_id(text: str) -> UUID:
    """The job id (a UUID) in ``text``, or exit 2."""
    try:
        return UUID(text.strip())
    except ValueError:
        raise fail(f"{text!r} is not a job id (a UUID)") from None


def read_state(text: str) -> JobState:
    """The job state named by ``text`` (any case), or exit 2 listing the choices."""
    try:
        return JobState(text.strip().lower())
    except ValueError:
        choices = ", ".join(s.value for s in JobState)
        raise fail(f"unknown state {text!r}; choose one of: {choices}") from None


def validation_exit(what: str, exc: ValidationError) -> typer.Exit:
    """Print a pydantic error about ``what`` as one line; return the Exit to raise."""
    return fail(describe_invalid(what, exc))
