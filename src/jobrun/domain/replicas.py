"""How far a read replica's data is behind its primary."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = ["ReplicaLag"]


@dataclass(frozen=True, slots=True)
class ReplicaLag:
    """What a standby says of its lag behind the primary, when jobrun reads from it.

    Reads from a replica (``read_url``) see the primary as it was ``behind``
    ago: a job enqueued or finished more recently may be missing or shown in
    an older state. Writes never go there.
    """

    behind: timedelta | None
    """Zero once the standby has replayed all the WAL it received; otherwise
    how long ago the last transaction it replayed committed on the primary;
    None when it has replayed none since it started (the lag is unknown)."""

    def describe(self) -> str:
        """One line for a person: ``read from a replica, 1.2s behind the primary``."""
        if self.behind is None:
            return "read from a replica, lag unknown (it has replayed nothing since it started)"
        seconds = self.behind.total_seconds()
        if seconds == 0:
            return "read from a replica, up to date with the primary"
        return f"read from a replica, {seconds:.1f}s behind the primary"
