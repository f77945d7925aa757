"""How far a running job says it is: :meth:`jobrun.registry.JobContext.progress`."""

from __future__ import annotations

import math
from datetime import datetime

from pydantic import BaseModel

__all__ = ["MAX_PROGRESS_MESSAGE", "JobProgress", "progress_report"]

MAX_PROGRESS_MESSAGE = 200
"""The longest progress message, in characters."""


class JobProgress(BaseModel):
    """The latest progress a running job reported, as its worker's heartbeat wrote it."""

    fraction: float
    """How much of the work is done, from 0 to 1."""
    message: str
    """What the handler said it is doing ('' for nothing)."""
    updated_at: datetime
    """When the heartbeat wrote it (UTC, the database's clock)."""

    def describe(self) -> str:
        """``40% resizing images``: for a person."""
        percent = f"{self.fraction * 100:.0f}%"
        return f"{percent} {self.message}" if self.message else percent


def progress_report(fraction: float, message: str) -> tuple[float, str]:
    """``(fraction, message)`` checked: ValueError naming what is wrong with either.

    ``fraction`` is a number from 0 to 1; ``message`` a string of at most
    :data:`MAX_PROGRESS_MESSAGE` characters.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise ValueError(f"progress must be a number from 0 to 1, got {fraction!r}")
    if math.isnan(fraction) or not 0 <= fraction <= 1:
        raise ValueError(f"progress must be a number from 0 to 1, got {fraction!r}")
    if not isinstance(message, str):
        raise ValueError(f"a progress message must be a string, got {type(message).__name__}")
    if len(message) > MAX_PROGRESS_MESSAGE:
        raise ValueError(
            f"a progress message is at most {MAX_PROGRESS_MESSAGE} characters, got {len(message)}"
        )
    return float(fraction), message
