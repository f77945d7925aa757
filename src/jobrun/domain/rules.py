"""The domain's limits and the checks that apply them, each with its own message.

Every bound here is a rule of jobrun's, checked before any row is written;
none is left to a column type or to an overflow. A ``*_problem`` function
returns why a value breaks its rule (a sentence naming the field), or None,
so each entry point (the models, the store, the CLI, the dashboard) can raise
its own error with the same words.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_NOTIFY_CHANNEL",
    "DEFAULT_QUEUE",
    "MAX_ATTEMPTS_LIMIT",
    "MAX_CONCURRENCY_LIMIT",
    "MAX_DELAY",
    "MAX_PAYLOAD_DEPTH",
    "MAX_PRIORITY",
    "MAX_QUEUE_NAME",
    "MIN_PRIORITY",
    "NOTIFY_CHANNEL_MAX_BYTES",
    "RUN_AT_FLOOR",
    "RUN_AT_LIMIT",
    "duration_problem",
    "notify_channel_problem",
    "payload_problem",
    "queue_name_problem",
    "run_at_problem",
    "schedule_name_problem",
    "storable_text",
    "text_problem",
]


DEFAULT_QUEUE = "default"
"""The queue of a job or schedule that names none."""
DEFAULT_MAX_ATTEMPTS = 25
"""How many attempts a job that names no ``max_attempts`` gets."""


MIN_PRIORITY = -32768
"""The lowest priority number. Lower numbers run first; the default is 0."""
MAX_PRIORITY = 32767
"""The highest priority number, run last; the range is that of a 16-bit integer."""
MAX_CONCURRENCY_LIMIT = 10_000
"""The highest ``concurrency_limit`` a job's key may have."""
MAX_ATTEMPTS_LIMIT = 10_000
"""The most attempts a job may be given; even a 1 s constant backoff then retries for hours."""
MAX_DELAY = timedelta(days=36_525)
"""The longest delay, backoff, interval or age anywhere in jobrun: 100 years (36525 days).

Far beyond any real schedule, and small enough that database now plus it stays
inside the dates Python and PostgreSQL both represent.
"""
DEFAULT_NOTIFY_CHANNEL = "jobrun"
"""The LISTEN/NOTIFY channel workers wait on; each notification's payload is a queue name."""
RUN_AT_FLOOR = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest ``run_at`` accepted; any past time means "due now" anyway."""
RUN_AT_LIMIT = datetime(9999, 1, 1, tzinfo=UTC)
"""``run_at`` must be before this instant, so it converts to UTC and back without overflow."""
MAX_PAYLOAD_DEPTH = 100
"""How deeply a payload's arrays and objects may nest (a scalar or ``{}`` is one level)."""

_MAX_DELAY_TEXT = "100 years (36525 days)"


def text_problem(field: str, value: str) -> str | None:
    """Why ``value`` cannot be stored in a PostgreSQL text column, or None.

    PostgreSQL text holds no NUL character, and UTF-8 has no encoding for a
    lone surrogate (Python hands undecodable bytes of ``argv`` over as those).
    """
    if "\x00" in value:
        return f"{field} must not contain a NUL character"
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            char = ord(exc.object[exc.start])
            return f"{field} must be valid Unicode text: it holds a lone surrogate (U+{char:04X})"
    return None


def storable_text(text: str) -> str:
    """``text`` with what a PostgreSQL text column refuses written out: ``\\x00``, ``\\ud800``.

    For text jobrun records but nobody typed as input, such as a handler's
    exception message or a cancel reason: refusing it would leave the attempt
    unrecorded, so the NUL and lone-surrogate characters :func:`text_problem`
    names are replaced by their escapes, and everything else is kept.
    """
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


NOTIFY_CHANNEL_MAX_BYTES = 63
"""The longest LISTEN/NOTIFY channel name PostgreSQL takes, in UTF-8 bytes (NAMEDATALEN - 1)."""


def notify_channel_problem(channel: str) -> str | None:
    """Why ``channel`` cannot be the LISTEN/NOTIFY channel, or None.

    ``pg_notify`` refuses a longer name, which would fail every enqueue that
    announces its job, and ``LISTEN`` would quietly listen on a shortened one.
    """
    if not channel:
        return "notify_channel must not be empty"
    problem = text_problem("notify_channel", channel)
    if problem is not None:
        return problem
    size = len(channel.encode())
    if size > NOTIFY_CHANNEL_MAX_BYTES:
        limit = NOTIFY_CHANNEL_MAX_BYTES
        return f"notify_channel must be at most {limit} bytes (UTF-8), not {size}"
    return None


def duration_problem(field: str, value: timedelta, *, positive: bool = False) -> str | None:
    """Why ``value`` is not a usable duration (negative, zero when ``positive``, too long)."""
    if positive and value <= timedelta(0):
        return f"{field} must be positive"
    if value < timedelta(0):
        return f"{field} must not be negative"
    if value > MAX_DELAY:
        return f"{field} must be at most {_MAX_DELAY_TEXT}"
    return None


def run_at_problem(value: datetime) -> str | None:
    """Why ``value`` cannot be a job's ``run_at`` (naive, or outside the bounds), or None."""
    # Comparing aware datetimes never overflows; converting them might, hence the bounds.
    if value.tzinfo is None:
        return "run_at must be timezone-aware"
    if value < RUN_AT_FLOOR:
        return "run_at must not be before 1970-01-01 UTC"
    if value >= RUN_AT_LIMIT:
        return "run_at must be before 9999-01-01 UTC"
    return None


def _json_key(key: object) -> str:
    # ASCII-escaped, so a message naming a bad key can itself always be printed.
    return f"[{json.dumps(key)}]" if isinstance(key, str) else f"[{key!r}]"


def payload_problem(payload: Any, root: str = "payload") -> str | None:
    """Why ``payload`` cannot be stored as jsonb, naming where (from ``root``), or None.

    Walks the decoded value, keys included, for what jsonb refuses: a NUL
    character, a lone surrogate, nesting deeper than MAX_PAYLOAD_DEPTH.
    Iterative, so no depth makes it recurse. It costs a visit per value; the
    store calls it only when a cheap test on the encoded text says it might
    find something.
    """
    stack: list[tuple[Any, str, int]] = [(payload, root, 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            problem = text_problem(path, value)
            if problem is not None:
                return problem
            continue
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list | tuple):
            items = enumerate(value)
        else:
            continue
        if depth > MAX_PAYLOAD_DEPTH:
            return f"{root} is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
        for key, child in items:
            if isinstance(key, str):
                problem = text_problem(f"a key in {path}", key)
                if problem is not None:
                    return problem
            stack.append((child, path + _json_key(key), depth + 1))
    return None


MAX_QUEUE_NAME = 128
"""The longest queue name, in characters."""


def queue_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a queue, or None: the one rule every entry point applies.

    A queue name is 1 to 128 characters with no whitespace, no ``,`` and no
    control or format character, and is not ``.`` or ``..``:

    * commas and whitespace separate the names of a list
      (``JOBRUN_QUEUE=mail,default``, ``--queue "mail default"``), so a name
      holding one could not be told apart from a list of names;
    * control and format characters (a newline, a zero-width space, a
      direction override) make different names look alike on a page or in a
      log line;
    * ``.`` and ``..`` are the path segments every URL resolver removes, so no
      dashboard URL could name such a queue.

    Anything else is allowed, ``/`` included: the dashboard percent-encodes
    names in its URLs. Names stored before this rule stay readable (listings
    and filters take any stored name); only new jobs, schedules, controls and
    worker settings must follow it.
    """
    if not name:
        return "queue name must not be empty"
    if len(name) > MAX_QUEUE_NAME:
        return f"queue name must be at most {MAX_QUEUE_NAME} characters"
    return _queue_name_problem(name)


@functools.lru_cache(maxsize=1024)
def _queue_name_problem(name: str) -> str | None:
    # Cached: a service enqueues into a handful of queues, many times over.
    problem = text_problem("queue name", name)
    if problem is not None:
        return problem
    if name in (".", ".."):
        return f"queue name must not be {name!r}: a URL cannot hold it as a path segment"
    for char in name:
        if char == ",":
            return (
                f"queue name {name!r} must not contain ',': it separates the names of a "
                "list (JOBRUN_QUEUE=mail,default)"
            )
        if char.isspace():
            return (
                f"queue name {name!r} must not contain whitespace: it separates the names of a list"
            )
        if unicodedata.category(char) in ("Cc", "Cf"):
            return f"queue name {name!r} must not contain a control or format character"
    return None


def schedule_name_problem(name: str) -> str | None:
    """Why a new schedule may not be named ``name``, or None (its length aside).

    A schedule is named in the dashboard's URLs as a queue is, and on its
    pages and in log lines: ``.`` and ``..`` are refused, and control or
    format characters, for the reasons :func:`queue_name_problem` gives.
    Whitespace and commas stay allowed (schedule names are never listed in
    one value). Schedules stored before this rule keep their names.
    """
    problem = text_problem("schedule name", name)
    if problem is not None:
        return problem
    if name in (".", ".."):
        return f"schedule name must not be {name!r}: a URL cannot hold it as a path segment"
    if any(unicodedata.category(char) in ("Cc", "Cf") for char in name):
        return f"schedule name {name!r} must not contain a control or format character"
    return None
