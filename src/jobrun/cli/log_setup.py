"""Logging for ``jobrun worker``: text or one JSON object per line, on stderr.

Records emitted while a handler runs carry ``job_id``, ``job_type``, ``queue``
and ``attempt`` (:class:`jobrun.telemetry.hooks.JobLogFilter`): fields of the JSON
object, a ``[job ...]`` suffix in text.

Named ``log_setup`` rather than ``logging`` so it never reads as (or shadows)
the standard library module it configures.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime
from typing import Any

from jobrun.cli.app import fail
from jobrun.outages import hold_driver_churn
from jobrun.telemetry.hooks import JobLogFilter

__all__ = ["JsonLogFormatter", "TextLogFormatter", "setup_logging"]

_LOG_RECORD_FIELDS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonLogFormatter(logging.Formatter):
    """One JSON object per log record: time, level, logger, message and any extras."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one line of JSON."""
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created).astimezone().isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _LOG_RECORD_FIELDS and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


class TextLogFormatter(logging.Formatter):
    """The text format, with ``[job <id> <type> queue=<q> attempt=<n>]`` on a handler's records."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as text, naming the job when it was emitted inside a handler."""
        text = super().format(record)
        fields = record.__dict__
        if "job_type" in fields and "job_id" in fields:
            text += (
                f" [job {fields['job_id']} {fields['job_type']}"
                f" queue={fields.get('queue', '?')} attempt={fields.get('attempt', '?')}]"
            )
        return text


def setup_logging(level: str, fmt: str) -> None:
    """Send every log record at ``level`` or above to stderr as ``fmt`` (text or json).

    An unknown level or format exits 2 (:func:`jobrun.cli.app.fail`).
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise fail(f"unknown log level {level!r}; choose debug, info, warning or error")
    if fmt not in ("text", "json"):
        raise fail(f"unknown log format {fmt!r}; choose text or json")
    handler = logging.StreamHandler(sys.stderr)
    # Records emitted inside a handler, by any logger, say which job they belong to.
    handler.addFilter(JobLogFilter())
    if fmt == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(TextLogFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # A database outage is said once, by jobrun.outages; psycopg's line per
    # connection lost would bury that line (debug logging shows them again).
    hold_driver_churn()
