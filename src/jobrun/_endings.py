"""How a worker names the ways its attempts end, in its log lines and in its count at stop.

One name per ending (``succeeded``, ``failed``, ``dead``, ``handed_back``,
...), shared by the metrics observer, the completer's running totals and the
stop line, so the line a worker prints when it stops says what happened:
``1 job succeeded, 1 handed back``, never "2 jobs completed" for a job that
was handed back.

Nothing here does I/O; it depends on the domain only.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobrun.domain import Job, JobState, OutcomeKind
from jobrun.errors import LeaseLost

__all__ = ["ending", "one_line", "plural", "stop_summary"]

_BY_STATE = {
    JobState.SUCCEEDED: "succeeded",
    JobState.DEAD: "dead",
    JobState.CANCELLED: "cancelled",
}
# A job queued again is named by the outcome that queued it.
_REQUEUED = {
    OutcomeKind.FAIL: "failed",
    OutcomeKind.RELEASE: "handed_back",
    OutcomeKind.SNOOZE: "snoozed",
}
# How the stop line words each ending, in the order it lists them.
_WORDS = (
    ("failed", "failed (to retry)"),
    ("dead", "dead"),
    ("cancelled", "cancelled"),
    ("snoozed", "snoozed"),
    ("handed_back", "handed back"),
    ("lease_lost", "lost to an expired lease"),
    ("not_recorded", "not recorded"),
)
_MAX_LINE = 500


def ending(kind: OutcomeKind, result: Job | BaseException) -> str:
    """The name of how an attempt ended, from its outcome and what the store made of it.

    ``not_recorded`` when the store could not record it (the lease then
    expires and the reaper decides).
    """
    if isinstance(result, Job):
        return _BY_STATE.get(result.state) or _REQUEUED.get(kind, "failed")
    if isinstance(result, LeaseLost):
        return "lease_lost"
    return "not_recorded"


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 job``, ``2 jobs``: ``count`` and ``word``, or ``words`` (default: an ``s`` added)."""
    return f"{count} {word}" if count == 1 else f"{count} {words or word + 's'}"


def stop_summary(endings: Mapping[str, int]) -> str:
    """What a worker's attempts came to, for its stop line: ``1 job succeeded, 1 handed back``."""
    parts = [f"{plural(endings.get('succeeded', 0), 'job')} succeeded"]
    parts += [f"{endings[name]} {words}" for name, words in _WORDS if endings.get(name)]
    return ", ".join(parts)


def one_line(text: str) -> str:
    """``text`` on one line and at most a few hundred characters, for a log message."""
    line = " ".join(text.split())
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 3] + "..."
