"""How the commands print: the rich console, timestamps, triggers and event tables.

Kept apart from the commands so every table shows times, durations and job
events the same way (times in UTC, ``YYYY-MM-DD HH:MM:SS``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from jobrun.cli.durations import format_duration
from jobrun.domain import Schedule

__all__ = ["events_table", "stdout", "trigger", "when"]


def _console() -> Console:
    # Piped output has no terminal width; don't squeeze job ids into 80 columns.
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        return Console(width=200)
    return Console()


stdout = _console()
"""The console every command prints its tables on."""


def when(value: datetime | None) -> str:
    """``value`` as ``YYYY-MM-DD HH:MM:SS``, or an empty string for None."""
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def trigger(schedule: Schedule) -> str:
    """What fires ``schedule``: ``cron <expression>`` or ``every <duration>``."""
    if schedule.cron is not None:
        return f"cron {schedule.cron}"
    assert schedule.every is not None
    return f"every {format_duration(schedule.every)}"


def events_table(events: Sequence[Any], title: str) -> Table:
    """A table of job events, one row each, with the last line of any detail."""
    table = Table(title=title)
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("event")
    table.add_column("from")
    table.add_column("to")
    table.add_column("attempt", justify="right")
    table.add_column("owner")
    table.add_column("detail")
    for event in events:
        detail = (event.detail or "").strip().splitlines()
        table.add_row(
            event.at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
            event.kind,
            event.from_state.value if event.from_state else "",
            event.to_state.value,
            str(event.attempt),
            event.owner or "",
            detail[-1][:120] if detail else "",
        )
    return table
