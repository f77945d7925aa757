"""Refused input is named the way jobrun's own checks name it, and a misspelt field is refused.

pydantic's own wording ("Input should be less than or equal to 32767") is
replaced by one sentence naming the field, the rule and the value given; a
keyword no model knows used to be dropped without a word, leaving the field
the user meant at its default.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobrun import Config, NewJob
from jobrun.domain import Backoff, NewSchedule, SchedulePatch, Unique
from jobrun.errors import ConfigurationError, InvalidJob, InvalidSchedule


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"priority": 99999}, "invalid job: priority must be at most 32767, not 99999"),
        ({"max_attempts": 0}, "invalid job: max_attempts must be at least 1, not 0"),
        ({"max_attempts": "x"}, "invalid job: max_attempts must be a whole number, not 'x'"),
        ({"max_attempts": 1.5}, "invalid job: max_attempts must be a whole number, not 1.5"),
        ({"queue": ""}, "invalid job: queue must not be empty"),
        ({"queue": "q" * 200}, "invalid job: queue must be at most 128 characters long, not 200"),
        ({"type": 5}, "invalid job: type must be text, not 5"),
        # What Python makes of argv bytes that are not UTF-8.
        ({"type": "t\udcff"}, "invalid job: type must be valid Unicode text, not 't\\udcff'"),
        ({"depends_on": ["x"]}, "invalid job: depends_on[0] must be a UUID, not 'x'"),
        ({"depends_on": 5}, "invalid job: depends_on must be a list, not 5"),
        (
            {"if_dependency_fails": "x"},
            "invalid job: if_dependency_fails must be 'cancel' or 'run', not 'x'",
        ),
        (
            {"run_at": "yesterday"},
            "invalid job: run_at must be a date and time with its time zone (ISO 8601, "
            "like 2026-12-05T18:00:00+00:00), not 'yesterday'",
        ),
        (
            {"delay": "30s"},
            "invalid job: delay must be a duration (a timedelta, a number of seconds or "
            "ISO 8601 like PT30S), not '30s'",
        ),
        (
            {"payload": {1, 2}},
            "invalid job: payload must be a JSON value (dicts, lists, strings, numbers, "
            "booleans and None), not a set",
        ),
        (
            {"backoff": 5},
            "invalid job: backoff must be a Backoff or a mapping of its fields, not 5",
        ),
        # A check of jobrun's own keeps its sentence, without the field said twice.
        ({"run_at": "2026-01-01T00:00:00"}, "invalid job: run_at must be timezone-aware"),
        ({"priorty": 5}, "invalid job: unknown field 'priorty'; did you mean 'priority'?"),
        ({"colour": "red"}, "invalid job: unknown field 'colour'"),
    ],
)
def test_a_refused_job_field_is_one_sentence_naming_the_value(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidJob) as refused:
        NewJob(**{"type": "t", **fields})
    assert str(refused.value) == message


def test_a_long_refused_text_is_quoted_cut_short() -> None:
    with pytest.raises(InvalidJob) as refused:
        NewJob(type="t", max_attempts="9" * 30 + "x" * 100)
    quoted = str(refused.value).split(", not ")[1]
    assert quoted == repr("9" * 30 + "x" * 9 + "…")


def test_a_missing_field_is_said_to_be_required() -> None:
    with pytest.raises(InvalidJob, match=r"^invalid job: type is required$"):
        NewJob()  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "build",
    [
        lambda: NewJob(type="t", queu="emails"),
        lambda: Backoff(bse=timedelta(seconds=1)),
        lambda: Unique(period=timedelta(hours=1), untl="finished"),
        lambda: NewSchedule(name="n", type="t", every=timedelta(minutes=1), queu="q"),
        lambda: SchedulePatch(priorty=3),
    ],
)
def test_every_model_users_build_refuses_a_misspelt_field(build: Any) -> None:
    with pytest.raises((InvalidJob, InvalidSchedule), match="unknown field"):
        build()


def test_a_misspelt_setting_is_refused_with_the_setting_meant() -> None:
    with pytest.raises(ConfigurationError) as refused:
        Config(concurency=3, leese="30s", concurrency=0)  # type: ignore[call-arg]
    assert str(refused.value) == (
        "invalid configuration: concurrency must be at least 1, not 0; "
        "unknown setting 'concurency'; did you mean 'concurrency'?; "
        "unknown setting 'leese'; did you mean 'lease'?"
    )
