"""Duration texts for the command line: ``30s``, ``1h30m``, ``250ms`` and back.

Options such as ``--lease``, ``--delay``, ``--every`` and ``--older-than`` take a
duration. The reader and printer live in :mod:`jobrun.durations`, shared with
:class:`~jobrun.config.Config`, so a duration means the same on the command
line and in a ``JOBRUN_*`` variable; they are re-exported here for the CLI,
with :func:`~jobrun.durations.human_duration` for measured times (a lag).
"""

from __future__ import annotations

from jobrun.durations import DurationError, format_duration, human_duration, parse_duration

__all__ = ["DurationError", "format_duration", "human_duration", "parse_duration"]
