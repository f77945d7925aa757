"""Durations as people write them: ``30s``, ``5m``, ``1h30m``, ``250ms``.

The CLI's options and the :class:`~jobrun.config.Config` read from
``JOBRUN_*`` variables share this one reader, so a duration means the same
wherever it is given, and has the same upper bound (:data:`jobrun.domain.MAX_DELAY`).
"""

from __future__ import annotations

import re
from datetime import timedelta

from jobrun.domain import MAX_DELAY
from jobrun.errors import ConfigurationError, DurationError

__all__ = [
    "DurationError",
    "format_duration",
    "human_duration",
    "parse_duration",
    "positive_seconds",
]


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}
_MAX_SECONDS = MAX_DELAY.total_seconds()


def parse_duration(text: str) -> timedelta:
    """Read ``30s``, ``5m``, ``2h``, ``1d``, ``1h30m``, ``250ms``, ``1.5h`` into a timedelta.

    Units: ``ms``, ``s``, ``m``, ``h``, ``d``, ``w``; parts add up, each unit at
    most once, and the whole is at most :data:`jobrun.domain.MAX_DELAY` (100
    years). A bare number, an unknown unit, a negative, empty or longer value
    raises :class:`DurationError` with a message fit for the user.
    """
    value = text.strip().lower()
    hint = "use a number and a unit, like 30s, 5m, 2h, 1d or 1h30m"
    too_long = f"duration {text!r} is too long: it must be at most 100 years (36525d)"
    if not value:
        raise DurationError(f"empty duration: {hint}")
    total = timedelta(0)
    seen: set[str] = set()
    pos = 0
    for match in _DURATION_PART.finditer(value):
        if match.start() != pos:
            break
        unit = match.group(2)
        if unit in seen:
            raise DurationError(f"invalid duration {text!r}: unit {unit!r} given twice")
        seen.add(unit)
        amount = float(match.group(1))
        # Checked as a float first: timedelta overflows (or meets infinity) long before.
        if amount * _UNITS[unit].total_seconds() > _MAX_SECONDS:
            raise DurationError(too_long)
        total += _UNITS[unit] * amount
        pos = match.end()
    if pos != len(value) or not seen:
        raise DurationError(f"invalid duration {text!r}: {hint}")
    if total > MAX_DELAY:
        raise DurationError(too_long)
    return total


def format_duration(value: timedelta) -> str:
    """A short human text for ``value``: ``1h30m``, ``3s``, ``250ms``."""
    micros = value // timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros == 0:
        return "0s"
    if micros < 1_000_000:
        return f"{sign}{micros / 1000:g}ms"
    seconds, rest = divmod(micros, 1_000_000)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    if seconds or rest:
        parts.append(f"{seconds + rest / 1_000_000:g}s")
    return sign + "".join(parts)


def human_duration(value: timedelta) -> str:
    """``value`` for a person to read at a glance, in one format at every size.

    Seconds with one decimal under a minute (``0.4s``, ``8.5s``), then the two
    largest units, the smaller padded to two digits (``2m 05s``, ``1h 03m``,
    ``2d 04h``). Unlike :func:`format_duration` it rounds: it is for showing a
    measured time (a queue's lag), not for reading back.
    """
    seconds = value.total_seconds()
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if round(seconds, 1) < 60:
        return f"{sign}{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{sign}{minutes}m {rest:02d}s"
    if whole < 86400:
        hours, rest = divmod(whole, 3600)
        return f"{sign}{hours}h {rest // 60:02d}m"
    days, rest = divmod(whole, 86400)
    return f"{sign}{days}d {rest // 3600:02d}h"


def positive_seconds(name: str, value: timedelta, *, allow_zero: bool = False) -> float:
    """``value`` in seconds, after checking it is a positive timedelta (or zero if allowed).

    Every duration jobrun takes is a :class:`~datetime.timedelta`; a bare
    number, whose unit a reader has to guess, is refused with a message
    naming the setting.
    """
    if not isinstance(value, timedelta):
        raise ConfigurationError(f"{name} must be a timedelta, got {value!r}")
    if value < timedelta(0) or (value == timedelta(0) and not allow_zero):
        raise ConfigurationError(f"{name} must be positive, got {format_duration(value)}")
    return value.total_seconds()
