"""How the dashboard shows times, durations and job ids: one function for each, on every page.

- A duration is one format at every size (:func:`duration`): ``850 ms``,
  ``12.4 s``, ``3 min 05 s``, ``2 h 10 min``, ``3 d 04 h``: milliseconds
  under a second, seconds with one decimal under a minute, then the two
  largest units with the smaller padded to two digits.
- A time (:func:`when`) is a ``<time>`` element whose text is relative to
  the page's "now" (``3 min 05 s ago``, ``in 2 h 10 min``) and whose title
  is the absolute time with its zone (``2026-12-04 14:20:21 UTC``); the job
  page shows the absolute one beside it too. Rendered on the server in UTC,
  so the page reads the same without JavaScript.
- A job id in a listing (:func:`short_id`) is its last 12 hex digits. The
  first digits of a UUIDv7 are its timestamp, the same for every job made in
  one millisecond. Its tail is where ids differ: random, or, for ids one
  process makes within a millisecond (:func:`jobrun.domain.new_job_ids`),
  counted up from the one before, so that only the last digits differ.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from markupsafe import Markup, escape

__all__ = [
    "SHORT_ID_DIGITS",
    "absolute",
    "duration",
    "error_line",
    "pretty",
    "relative",
    "short_id",
    "short_payload",
    "sparkline",
    "when",
]

SHORT_ID_DIGITS = 12
"""How many of a job id's last hex digits a listing shows."""


def duration(value: timedelta | float | None) -> str:
    """``value`` (a timedelta or seconds) as a person reads it; ``""`` for None.

    Rounded to what the unit shows, never to a value the next unit would
    write differently (59.96 s is ``1 min 00 s``, not ``60.0 s``).
    """
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if round(seconds * 1000) < 1000:
        return f"{sign}{round(seconds * 1000)} ms"
    if round(seconds, 1) < 60:
        return f"{sign}{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{sign}{minutes} min {rest:02d} s"
    if whole < 86400:
        hours, rest = divmod(whole, 3600)
        return f"{sign}{hours} h {rest // 60:02d} min"
    days, rest = divmod(whole, 86400)
    return f"{sign}{days} d {rest // 3600:02d} h"


def absolute(value: datetime) -> str:
    """``value`` in UTC to the second, with the zone: ``2026-12-04 14:20:21 UTC``."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def relative(value: datetime, now: datetime) -> str:
    """``value`` as seen from ``now``: ``3 min 05 s ago``, ``in 2 h 10 min``, or ``just now``.

    Whole seconds from a second up (a page is not read to the millisecond).
    """
    seconds = (value - now).total_seconds()
    if abs(seconds) < 1:
        return "just now"
    text = duration(float(int(abs(seconds))))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def when(value: datetime | None, now: datetime, *, full: bool = False) -> Markup:
    """A ``<time>`` element for ``value``: relative text, the absolute time with its zone
    in its title (and shown after it when ``full``); an empty string for None."""
    if value is None:
        return Markup("")
    stamp = absolute(value)
    iso = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    shown = f' <span class="abs">({escape(stamp)})</span>' if full else ""
    return Markup(
        f'<time datetime="{iso}" title="{escape(stamp)}">'
        f"{escape(relative(value, now))}{shown}</time>"
    )


def short_id(value: UUID | str) -> str:
    """The last :data:`SHORT_ID_DIGITS` hex digits of a job id, after ``…``."""
    return "…" + str(value).replace("-", "")[-SHORT_ID_DIGITS:]


def short_payload(value: Any, limit: int) -> str:
    """``value`` as compact JSON, cut to ``limit`` characters with ``…``."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_line(value: str | None, limit: int) -> str:
    """The line of a stored error that says what failed: a traceback's last, cut to ``limit``."""
    lines = [line.strip() for line in (value or "").splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def pretty(value: Any) -> str:
    """``value`` as indented JSON with sorted keys, for the job page."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def sparkline(values: list[int], width: int = 120, height: int = 24) -> str:
    """An inline SVG polyline of ``values``; numbers only, so nothing to escape.

    Drawn in ``currentColor``, so the page's colours (light or dark) apply.
    """
    top = max(values, default=0) or 1
    step = width / max(len(values) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - 1 - (v / top) * (height - 2):.1f}" for i, v in enumerate(values)
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="finished jobs per interval, peak {top}">'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{points}"/></svg>'
    )
