"""The reporter: hands each attempt's outcome to the completer, then logs and counts it.

One line per attempt that did not succeed (a retry, a snooze, a cancel, a
death, a lost lease) and a DEBUG line per success; the observer
(:class:`jobrun.telemetry.hooks.Observer`, metrics) hears of every attempt recorded.
A completion whose effect did not commit (a failing commit callback, a
database error) is reported again as a failed attempt, so it retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from jobrun._endings import ending
from jobrun._endings import one_line as short_line
from jobrun.domain import Job, Outcome, OutcomeKind
from jobrun.errors import LeaseLost
from jobrun.outages import process_outages
from jobrun.telemetry.hooks import Observer
from jobrun.worker.attempt import Attempt, error_text, log_fields, one_line

__all__ = ["Reporter"]

_LABELS = {
    OutcomeKind.FAIL: "failed",
    OutcomeKind.RELEASE: "handed_back",
    OutcomeKind.SNOOZE: "snoozed",
    OutcomeKind.CANCEL: "cancelled",
}


class Reporter:
    """Reports outcomes through ``submit`` (the completer's) for the worker ``owner``."""

    def __init__(
        self,
        submit: Callable[[Outcome], Awaitable[Job | BaseException]],
        *,
        owner: str,
        observer: Observer | None,
        log: logging.Logger,
    ) -> None:
        self._submit = submit
        self._owner = owner
        self._log = log
        self._observer = observer

    async def report(self, run: Attempt, outcome: Outcome) -> None:
        """Hand ``outcome`` to the completer and log how the attempt ended."""
        result = await self._submit(outcome)
        if self._observer is not None:
            self._observe(run, outcome, result)
        if isinstance(result, Job):
            state = result.state.value
            # A success is the common case: one INFO line per job cost a
            # busy worker about a quarter of its throughput, so it is DEBUG;
            # every other ending (retry, snooze, cancel, dead) stays visible.
            if state == "dead":
                level = logging.WARNING
            elif state == "succeeded":
                level = logging.DEBUG
            else:
                level = logging.INFO
            label = (
                state
                if outcome.kind is OutcomeKind.COMPLETE
                else f"{_LABELS[outcome.kind]}:{state}"
            )
            self._record(run, label, level=level, detail=outcome.detail, reason=run.reason)
        elif isinstance(result, LeaseLost):
            self._record(run, "lease_lost", level=logging.WARNING, detail=str(result))
        elif isinstance(result, asyncio.CancelledError):
            self._record(run, "abandoned", level=logging.ERROR, detail="worker stopped")
        elif outcome.kind is OutcomeKind.COMPLETE:
            # The effect did not commit (a failing commit callback, a database
            # error): it is a failed attempt like any other, so it retries.
            run.reason = f"completion failed: {one_line(result)}"
            detail = f"completion failed: {error_text(result)}"
            await self.report(run, Outcome(job=run.job, kind=OutcomeKind.FAIL, detail=detail))
        else:
            # During a database outage the process says so once; each job's line is DEBUG.
            outage = process_outages().failed(result)
            self._log.log(
                logging.DEBUG if outage else logging.WARNING,
                "could not record the %s of job %s, its lease will expire: %s",
                outcome.kind.value,
                run.job.id,
                one_line(result),
                exc_info=result if self._log.isEnabledFor(logging.DEBUG) else None,
                extra=log_fields(run, self._owner, outcome="report_failed"),
            )

    def _observe(self, run: Attempt, outcome: Outcome, result: Job | BaseException) -> None:
        """Tell the observer how the attempt ended (nothing for an attempt not recorded)."""
        assert self._observer is not None
        label = ending(outcome.kind, result)
        if label != "not_recorded":
            self._observer.finished(run.job, label, run.ran)

    def _record(
        self, run: Attempt, outcome: str, *, level: int, detail: str = "", reason: str = ""
    ) -> None:
        """Log how the attempt ended; the line itself says why, in every log format.

        ``detail`` (the whole error, a traceback maybe) goes in the record's
        ``error`` field; the message carries ``reason``, or else ``detail``
        on one line.
        """
        if not self._log.isEnabledFor(level):
            return
        extra = log_fields(run, self._owner, outcome=outcome)
        if detail:
            extra["error"] = detail
        why = short_line(reason or detail)
        self._log.log(
            level,
            "job %s (%s, attempt %d): %s in %.1fms%s",
            run.job.id,
            run.job.type,
            run.job.attempts,
            outcome,
            extra["duration_ms"],
            f": {why}" if why else "",
            extra=extra,
        )
