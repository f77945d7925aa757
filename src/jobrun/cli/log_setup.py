"""Logging for ``jobrun worker``: text or one JSON object per line, on stderr.

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

__all__ = ["JsonLogFormatter", "setup_logging"]

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
    if fmt == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
