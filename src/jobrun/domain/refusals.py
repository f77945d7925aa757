"""pydantic's refusals of a field, said the way jobrun's own checks say them.

pydantic words its errors for any model ("Input should be less than or equal
to 32767"); jobrun's checks name the field, the rule and the value given
("priority must be at most 32767, not 99999"). The models users build from
their input (jobs, schedules, configuration, filters) are validated by
pydantic, so its errors are rephrased here, by their stable ``type``, into
that one voice. A type not listed keeps pydantic's own text after the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from difflib import get_close_matches
from typing import Any

from pydantic_core import ErrorDetails

__all__ = ["field_label", "field_problem"]

_SHOWN_TEXT = 40
"""How much of a refused string a message quotes; a longer one is cut with ``…``."""


def field_label(loc: Iterable[int | str]) -> str:
    """The field a pydantic location names: ``backoff.base``, ``depends_on[0]``."""
    label = ""
    for part in loc:
        if isinstance(part, int):
            label += f"[{part}]"
        else:
            label += f".{part}" if label else str(part)
    return label


def _shown(value: Any) -> str:
    """``value`` as a message quotes it: text in quotes, numbers as typed, else its kind."""
    if isinstance(value, str):
        cut = value if len(value) <= _SHOWN_TEXT else value[: _SHOWN_TEXT - 1] + "…"
        return repr(cut)
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    return f"a {type(value).__name__}"


def _bound(word: str, key: str) -> Callable[[str, ErrorDetails], str]:
    def say(label: str, err: ErrorDetails) -> str:
        limit = err.get("ctx", {}).get(key)
        return f"{label} must be {word} {limit}, not {_shown(err['input'])}"

    return say


def _kind(kind: str) -> Callable[[str, ErrorDetails], str]:
    def say(label: str, err: ErrorDetails) -> str:
        return f"{label} must be {kind}, not {_shown(err['input'])}"

    return say


def _too_short(label: str, err: ErrorDetails) -> str:
    least = err.get("ctx", {}).get("min_length", 1)
    if least == 1:
        return f"{label} must not be empty"
    return f"{label} must be at least {least} characters long, not {len(err['input'])}"


def _too_long(label: str, err: ErrorDetails) -> str:
    most = err.get("ctx", {}).get("max_length")
    return f"{label} must be at most {most} characters long, not {len(err['input'])}"


def _too_many(label: str, err: ErrorDetails) -> str:
    ctx = err.get("ctx", {})
    return (
        f"{label} must hold at most {ctx.get('max_length')} items, not {ctx.get('actual_length')}"
    )


def _model(label: str, err: ErrorDetails) -> str:
    model = err.get("ctx", {}).get("class_name", "model")
    return f"{label} must be a {model} or a mapping of its fields, not {_shown(err['input'])}"


def _choice(label: str, err: ErrorDetails) -> str:
    expected = err.get("ctx", {}).get("expected", "one of its choices")
    return f"{label} must be {expected}, not {_shown(err['input'])}"


_WHOLE = _kind("a whole number")
_MOMENT = _kind("a date and time with its time zone (ISO 8601, like 2026-12-05T18:00:00+00:00)")
_SPAN = _kind("a duration (a timedelta, a number of seconds or ISO 8601 like PT30S)")

_PHRASES: dict[str, Callable[[str, ErrorDetails], str]] = {
    "missing": lambda label, err: f"{label} is required",
    "less_than_equal": _bound("at most", "le"),
    "greater_than_equal": _bound("at least", "ge"),
    "less_than": _bound("less than", "lt"),
    "greater_than": _bound("more than", "gt"),
    "string_too_short": _too_short,
    "string_too_long": _too_long,
    "too_long": _too_many,
    "int_type": _WHOLE,
    "int_parsing": _WHOLE,
    "int_from_float": _WHOLE,
    "float_type": _kind("a number"),
    "float_parsing": _kind("a number"),
    "bool_type": _kind("true or false"),
    "bool_parsing": _kind("true or false"),
    "string_type": _kind("text"),
    "string_unicode": _kind("valid Unicode text"),
    "uuid_type": _kind("a UUID"),
    "uuid_parsing": _kind("a UUID"),
    "datetime_type": _MOMENT,
    "datetime_parsing": _MOMENT,
    "datetime_from_date_parsing": _MOMENT,
    "time_delta_type": _SPAN,
    "time_delta_parsing": _SPAN,
    "list_type": _kind("a list"),
    "tuple_type": _kind("a list"),
    "dict_type": _kind("a mapping of names to values"),
    "model_type": _model,
    "literal_error": _choice,
    "enum": _choice,
    "invalid-json-value": _kind("a JSON value (dicts, lists, strings, numbers, booleans and None)"),
}


def field_problem(
    label: str, err: ErrorDetails, *, known: Iterable[str] = (), noun: str = "field"
) -> str:
    """One of pydantic's errors about ``label`` as one sentence in jobrun's voice.

    ``known`` names the model's fields, so that an unknown one (a typo) is
    answered with the closest known name; ``noun`` is what such a name is
    called (``"setting"`` for the configuration).
    """
    kind = err["type"]
    if kind == "extra_forbidden":
        close = get_close_matches(label, list(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {noun} {label!r}{hint}"
    phrase = _PHRASES.get(kind)
    if phrase is not None:
        return phrase(label, err)
    message = str(err["msg"]).removeprefix("Value error, ")
    if not label or message.startswith(f"{label.rsplit('.', 1)[-1]} "):
        return message  # a check of jobrun's own that already names its field
    return f"{label}: {message}"
