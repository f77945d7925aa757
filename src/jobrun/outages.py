"""One warning when the database stops answering, one line when it answers again.

While PostgreSQL restarts, crashes or fails over, every part of a worker
process fails on each of its retries: claims, completions, heartbeats, the
reaper, the notifier's ``LISTEN``, the leaders' locks, and psycopg's pool
reconnecting. Logged one by one, a ten-second outage wrote dozens of lines
per process and hid when it began and ended. Here the parts report to one
:class:`OutageLog` per process instead:

* the first failure that is an outage (:func:`is_outage`) logs one warning on
  the logger named "jobrun.database", ``database unavailable, retrying until it
  answers: <reason>``;
* every later failure while it lasts, and each part's own "working again"
  line after it, goes to the part's logger at DEBUG (with the traceback),
  and psycopg's warnings of each connection lost are held back where the
  process installs :class:`DriverChurnHeld` (``jobrun worker`` and the
  other commands do);
* the first success of any part logs one line, ``database answers again
  after 12.3s (40 failed tries not logged)``.

A failure that is not an outage (a bug, a constraint, a refused transition)
is logged by its part at WARNING as before, since it needs attention of its
own. The log is per process, like the logging it writes to: two clients of
one process against different servers share it, which only merges their
announcements.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from jobrun.errors import DatabaseUnavailable, PoolExhausted

__all__ = [
    "DriverChurnHeld",
    "OutageLog",
    "PartHealth",
    "hold_driver_churn",
    "is_outage",
    "process_outages",
]

_database_log = logging.getLogger("jobrun.database")

SETTLE_SECONDS = 5.0
"""How long after an outage ends a failure still counts as that outage's. At a
restart or a failover, connections opened to the old server just before it
died (a pool's new connection, a backend the crash did not reach) fail once
each when next used, seconds after the first part found the server back. A
new outage that begins this soon is announced at its first failure after
this window."""
# A connection refused, reset or timed out below psycopg (the notifier's and
# the locks' own connections) arrives as one of these.
_NETWORK_ERRORS = (ConnectionError, TimeoutError)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached (or written: a full disk).

    :class:`~jobrun.errors.DatabaseUnavailable` and its kinds, except
    :class:`~jobrun.errors.PoolExhausted` (the server is fine; this process
    asked for more connections than its pool holds), and network errors.
    """
    if isinstance(exc, PoolExhausted):
        return False
    return isinstance(exc, (DatabaseUnavailable, *_NETWORK_ERRORS))


class OutageLog:
    """Whether this process is in a database outage, and the two lines that bound it.

    Thread-safe: sync handlers' threads and the event loop report to the
    same log. ``clock`` is for tests.
    """

    def __init__(
        self,
        logger: logging.Logger = _database_log,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._unlogged = 0
        self._outages = 0
        self._answered_at: float | None = None
        self._aftershocks = 0

    @property
    def down(self) -> bool:
        """Whether an outage was announced and nothing has succeeded since."""
        return self._since is not None

    @property
    def outages(self) -> int:
        """How many outages this log has announced."""
        return self._outages

    @property
    def aftershocks(self) -> int:
        """How many failures came just after an outage ended and were taken as part of it."""
        return self._aftershocks

    def failed(self, exc: BaseException) -> bool:
        """Count a part's failure; True when it is an outage (announced once, the rest counted)."""
        if not is_outage(exc):
            return False
        self.lost(_reason(exc))
        return True

    def lost(self, reason: str) -> None:
        """The database stopped answering (as a part that knows its errors decided): say so once.

        A failure within :data:`SETTLE_SECONDS` of the end of an outage is
        taken for a connection that outage broke, met by a part that had it
        idle, not for a new outage: it is counted, not announced.
        """
        with self._lock:
            if self._since is not None:
                self._unlogged += 1
                return
            answered = self._answered_at
            if answered is not None and self._clock() - answered < SETTLE_SECONDS:
                self._aftershocks += 1
                return
            self._since = self._clock()
            self._unlogged = 0
            self._outages += 1
        self._logger.warning("database unavailable, retrying until it answers: %s", reason)

    def log_failure(
        self, logger: logging.Logger, exc: BaseException, message: str, *args: object
    ) -> bool:
        """Log one failed try of a part: at DEBUG during an outage, else WARNING; True if an outage.

        Debug logging adds the traceback.
        """
        outage = self.failed(exc)
        level = logging.DEBUG if outage else logging.WARNING
        debug = logger.isEnabledFor(logging.DEBUG)
        logger.log(level, message, *args, exc_info=exc if debug else None)
        return outage

    def answered(self) -> None:
        """A part's call succeeded: end the outage, if one was announced, with one line."""
        if self._since is None:
            return
        with self._lock:
            since, self._since = self._since, None
            if since is None:
                return
            unlogged = self._unlogged
            self._answered_at = self._clock()
        seconds = self._answered_at - since
        self._logger.warning(
            "database answers again after %.1fs (%d failed tries not logged)", seconds, unlogged
        )

    def part(self, logger: logging.Logger, recovered: str) -> PartHealth:
        """A :class:`PartHealth` for one part that logs to ``logger``."""
        return PartHealth(self, logger, recovered)


class PartHealth:
    """One part's failures and recoveries (the claims, the heartbeat, the reaper, ...).

    The part calls :meth:`failed` for each failed try and :meth:`ok` after
    each successful one. An outage is said once by the process's
    :class:`OutageLog`; any other failure is the part's own warning, and
    its ``recovered`` line follows it once the part works again.
    """

    def __init__(self, outages: OutageLog, logger: logging.Logger, recovered: str) -> None:
        self._outages = outages
        self._log = logger
        self._recovered = recovered
        self._failing = False
        self._in_outage = False

    @property
    def failing(self) -> bool:
        """Whether the part's last try failed."""
        return self._failing

    def failed(self, exc: BaseException, message: str, *args: object) -> None:
        """Log one failed try: ``message % args``, at DEBUG during an outage, else WARNING."""
        outage = self._outages.log_failure(self._log, exc, message, *args)
        self._in_outage = self._in_outage or outage
        self._failing = True

    def ok(self) -> None:
        """The part's try succeeded: end any outage, and say the part works again."""
        self._outages.answered()
        if not self._failing:
            return
        level = logging.DEBUG if self._in_outage else logging.INFO
        self._failing = self._in_outage = False
        self._log.log(level, self._recovered)


class DriverChurnHeld(logging.Filter):
    """Holds back psycopg's warnings of a connection lost or not opened, unless jobrun logs DEBUG.

    psycopg and its pool warn once per connection they discard (closed or
    broken) and once per failed reconnect: at a server restart, a line per
    pooled connection and per second, all of it the outage that
    :class:`OutageLog` reports in one line (and its parts' failures are
    what make it). Installed by :func:`hold_driver_churn`; every other
    psycopg record passes, as does everything when ``jobrun`` logs at DEBUG.
    """

    CHURN = (
        "discarding broken connection",
        "discarding closed connection",
        "error connecting in",
        "error ignored terminating",
        "error ignored exiting",
        "error ignored in rollback",
    )
    """How the held records' messages begin (their format strings, before arguments)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` goes on: False for connection churn while jobrun is not at DEBUG."""
        if record.levelno >= logging.ERROR or not isinstance(record.msg, str):
            return True
        if not record.msg.startswith(self.CHURN):
            return True
        return logging.getLogger("jobrun").isEnabledFor(logging.DEBUG)


_held = DriverChurnHeld()


def hold_driver_churn() -> None:
    """Install :class:`DriverChurnHeld` on psycopg's loggers (once; the CLI's processes do)."""
    for name in ("psycopg", "psycopg.pool"):
        logger = logging.getLogger(name)
        if _held not in logger.filters:
            logger.addFilter(_held)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, DatabaseUnavailable):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_process_log = OutageLog()


def process_outages() -> OutageLog:
    """The :class:`OutageLog` every part of this process reports to."""
    return _process_log
