"""A schedule's fields as people type them: the CLI's options and the dashboard's form fields.

``jobrun schedules add|edit`` and the dashboard's Schedules page (its forms
and its API) read a schedule through these two functions, so neither can take
a schedule the other refuses, and both refuse it with the same reason:

* ``every`` is a duration text (``5m``, ``1h30m``), read by
  :func:`jobrun.durations.parse_duration`;
* ``payload`` is JSON text;
* ``priority`` and ``max_attempts`` are whole numbers (digits, or an int);
* ``cron`` and ``timezone`` are checked by :mod:`jobrun.cron`, as the store
  checks them, before anything is sent;
* every field's bounds and the queue name rule are those of
  :class:`~jobrun.domain.NewSchedule` and :class:`~jobrun.domain.SchedulePatch`.

A blank field is a field not given. Every refusal is one
:class:`~jobrun.errors.InvalidSchedule` naming the field as its caller spells
it (``spell``: ``--every`` on the command line, ``every`` on the dashboard).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from jobrun.cron import validate_cron, validate_timezone
from jobrun.domain import MAX_PAYLOAD_DEPTH, NewSchedule, SchedulePatch
from jobrun.durations import parse_duration
from jobrun.errors import DurationError, InvalidSchedule

__all__ = ["SCHEDULE_FIELDS", "new_schedule", "schedule_patch"]

SCHEDULE_FIELDS = (
    "type",
    "cron",
    "every",
    "timezone",
    "queue",
    "payload",
    "priority",
    "max_attempts",
)
"""The fields a schedule is made or edited with (its name aside)."""

_WHOLE = re.compile(r"[+-]?[0-9]{1,40}")
Spell = Callable[[str], str]


def _given(values: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``values`` that say something: blank texts and None are left out."""
    return {
        k: v.strip() if isinstance(v, str) else v
        for k, v in values.items()
        if v is not None and not (isinstance(v, str) and not v.strip())
    }


def _whole(field: str, value: Any, spell: Spell) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _WHOLE.fullmatch(value):
        return int(value)
    shown = repr(value[:40]) if isinstance(value, str) else type(value).__name__
    raise InvalidSchedule(f"{spell(field)} must be a whole number, not {shown}")


def _payload(text: Any, spell: Spell) -> Any:
    if not isinstance(text, str):
        raise InvalidSchedule(f"{spell('payload')} must be JSON text")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSchedule(f"{spell('payload')} is not valid JSON: {exc}") from None
    except RecursionError:
        # The parser recurses per level; a payload this deep is refused anyway.
        raise InvalidSchedule(
            f"{spell('payload')}: payload is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
        ) from None


def _read(values: Mapping[str, Any], spell: Spell) -> dict[str, Any]:
    """The given fields, each turned from its text into its value (not yet bounds-checked)."""
    fields = _given(values)
    unknown = sorted(set(fields) - set(SCHEDULE_FIELDS) - {"name"})
    if unknown:
        raise InvalidSchedule(f"unexpected field {spell(unknown[0])}")
    for text_field in ("name", "type", "cron", "timezone", "queue", "every"):
        if text_field in fields and not isinstance(fields[text_field], str):
            raise InvalidSchedule(f"{spell(text_field)} must be a string")
    if "every" in fields:
        try:
            fields["every"] = parse_duration(fields["every"])
        except DurationError as exc:
            raise InvalidSchedule(f"{spell('every')}: {exc}") from None
    if "payload" in fields:
        fields["payload"] = _payload(fields["payload"], spell)
    for number in ("priority", "max_attempts"):
        if number in fields:
            fields[number] = _whole(number, fields[number], spell)
    return fields


def _check_trigger(cron: str | None, timezone: str | None) -> None:
    # The store checks these again before it writes; checking here first gives
    # the CLI and the dashboard the same refusal before anything is sent.
    if timezone is not None:
        validate_timezone(timezone)
    if cron is not None:
        validate_cron(cron, timezone or "UTC")


def new_schedule(values: Mapping[str, Any], *, spell: Spell = str) -> NewSchedule:
    """The schedule ``values`` (``name`` and :data:`SCHEDULE_FIELDS`, as texts) describe.

    ``name`` and ``type`` must be given and not blank, and exactly one of
    ``cron`` and ``every``; the other fields
    default as :class:`~jobrun.domain.NewSchedule`'s do. InvalidSchedule when
    anything is wrong, naming the field.
    """
    fields = _read(values, spell)
    for required in ("name", "type"):
        if required not in fields:
            # Said here: NewSchedule would call a blank one "Field required".
            blank = isinstance(values.get(required), str)
            raise InvalidSchedule(
                f"{spell(required)} must not be blank"
                if blank
                else f"{spell(required)} is required"
            )
    if ("cron" in fields) == ("every" in fields):
        raise InvalidSchedule(f"give exactly one of {spell('cron')} and {spell('every')}")
    _check_trigger(fields.get("cron"), fields.get("timezone", "UTC"))
    return NewSchedule(**fields)


def schedule_patch(values: Mapping[str, Any], *, spell: Spell = str) -> SchedulePatch:
    """The change ``values`` (any of :data:`SCHEDULE_FIELDS`, as texts) make to a schedule.

    A field left out or blank stays as it is; ``cron`` or ``every`` switches
    the trigger (one of them, not both). Refuses a change that changes
    nothing. The whole schedule it makes is checked again by the store,
    against the schedule as it is then.
    """
    fields = _read(values, spell)
    if "name" in fields:
        raise InvalidSchedule("a schedule cannot be renamed: create one under the new name")
    if "payload" in fields and fields["payload"] is None:
        # SchedulePatch reads None as "not given": say so rather than change nothing.
        raise InvalidSchedule(f"{spell('payload')} cannot be changed to null")
    if not fields:
        raise InvalidSchedule(f"give a field to change: {', '.join(map(spell, SCHEDULE_FIELDS))}")
    if "cron" in fields and "every" in fields:
        raise InvalidSchedule(f"give {spell('cron')} or {spell('every')}, not both")
    # A new expression alone is checked in UTC here, and with the schedule's
    # own zone by the store.
    _check_trigger(fields.get("cron"), fields.get("timezone"))
    return SchedulePatch(**fields)
