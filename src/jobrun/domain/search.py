"""Searching the jobs listing: what a search may ask, checked once for the store, web and CLI.

A search finds jobs by id prefix or suffix (hex digits, dashes ignored), by a
case-insensitive piece of their last error, or by payload containment (JSON
that the payload contains, as PostgreSQL's ``jsonb @>`` decides). No index
answers the last three, so the store examines at most a bounded number of jobs
per call (:data:`SEARCH_ROWS` by default), newest first, and says when it
stopped there (:attr:`jobrun.domain.JobPage.scan_cut`); an id prefix narrows
that walk to the range of ids it names. Everything here is pure: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any
from uuid import UUID

from jobrun.domain.rules import MAX_PAYLOAD_DEPTH, payload_problem, text_problem

__all__ = [
    "INDEXED_STATES",
    "MAX_SEARCH_TEXT",
    "SEARCH_ROWS",
    "error_search",
    "id_digits",
    "id_range",
    "payload_search",
    "split_id_search",
]

SEARCH_ROWS = 50_000
"""The most jobs one search call examines by default before it stops and says so."""
INDEXED_STATES = frozenset({"dead", "cancelled"})
"""The states whose searches examine only jobs of that state (an index holds them in id
order); a search within any other state examines jobs of every state and keeps its own."""
MAX_SEARCH_TEXT = 10_000
"""The longest error text or payload JSON a search takes, in characters."""

_HEX = re.compile(r"[0-9a-f]{1,32}")
# What marks an id search as a suffix: a leading ellipsis, three dots or a star.
_SUFFIX_MARKS = ("…", "...", "*")


def id_digits(field: str, text: str) -> str:
    """``text`` as the lowercase hex digits of part of a job id; ValueError naming ``field``.

    Dashes and surrounding spaces are dropped and case is ignored, so a piece
    copied from anywhere in a printed id works as it is.
    """
    digits = text.strip().replace("-", "").lower()
    if not _HEX.fullmatch(digits):
        shown = repr(text[:40])
        raise ValueError(
            f"{field} must be 1 to 32 hex digits of a job id (0-9, a-f; dashes are "
            f"ignored), not {shown}"
        )
    return digits


def split_id_search(text: str) -> tuple[str | None, str | None]:
    """The id prefix or suffix a search box holds: ``(prefix, None)`` or ``(None, suffix)``.

    ``0193ab`` (or ``0193ab…``) is a prefix; ``…9f2c``, ``...9f2c`` or
    ``*9f2c`` a suffix. Empty text is neither: ``(None, None)``. The digits
    are checked by :func:`id_digits` (ValueError naming ``id``).
    """
    text = text.strip()
    if not text:
        return None, None
    for mark in _SUFFIX_MARKS:
        if text.startswith(mark):
            return None, id_digits("id", text.removeprefix(mark))
    for mark in _SUFFIX_MARKS:
        text = text.removesuffix(mark)
    return id_digits("id", text), None


def id_range(prefix: str | None, cursor: UUID | None) -> tuple[UUID, UUID]:
    """The ids a search walks, inclusive: those starting with ``prefix``, below ``cursor``.

    The high end may fall below the low end (a cursor before the prefix's
    range): the walk is then empty.
    """
    digits = prefix or ""
    low = UUID(digits.ljust(32, "0"))
    high = UUID(digits.ljust(32, "f"))
    if cursor is not None:
        if cursor.int == 0:
            return UUID(int=1), UUID(int=0)  # nothing lies below the smallest id
        high = UUID(int=min(high.int, cursor.int - 1))
    return low, high


def payload_search(text: str) -> str:
    """The JSON text a payload search looks for, checked and written compactly.

    ValueError says what is wrong: not JSON (with the parser's reason and
    place), NaN or Infinity, a value PostgreSQL's jsonb refuses (a NUL
    character, too deep), or text over :data:`MAX_SEARCH_TEXT` characters.
    """
    if len(text) > MAX_SEARCH_TEXT:
        raise ValueError(f"payload must be at most {MAX_SEARCH_TEXT} characters of JSON")
    try:
        value: Any = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError(f"payload is nested more than {MAX_PAYLOAD_DEPTH} levels deep") from None
    except ValueError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f'payload must be JSON, such as {{"customer": 42}}: {reason}') from None
    problem = payload_problem(value)
    if problem is not None:
        raise ValueError(f"payload is refused: {problem}")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def error_search(text: str) -> str:
    """The error text a search looks for; ValueError when no text column could hold it."""
    if len(text) > MAX_SEARCH_TEXT:
        raise ValueError(f"error must be at most {MAX_SEARCH_TEXT} characters")
    problem = text_problem("error", text)
    if problem is not None:
        raise ValueError(problem)
    return text


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
