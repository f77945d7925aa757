"""The ``jobrun`` command: run workers, enqueue jobs and operate a jobrun database.

Every command that needs the database takes ``--database-url`` (or reads
``JOBRUN_DATABASE_URL``; with neither it uses the embedded server) and runs its
async body through :func:`run_with_pool`, which opens the pool, closes it, and
turns any :class:`~jobrun.errors.JobrunError` into one ``error: ...`` line on
stderr and exit code 2, without a traceback. Input is checked *before* the
database is touched (JSON, durations, states, job ids), so a bad argument
writes nothing. Every option also reads a ``JOBRUN_*`` environment variable
(shown by ``--help``).

Commands: ``migrate [status]``, ``worker``, ``enqueue``, ``jobs list|show|
cancel|retry|purge``, ``events``, ``schedules add|list|pause|resume|remove``,
``queues list|pause|resume|limit|unlimit``, ``workers``, ``workflows show``,
``stats``, ``demo`` and ``web``.

The package: :mod:`~jobrun.cli.app` (the typer app, shared options, error
mapping, :func:`main`), :mod:`~jobrun.cli.durations`, :mod:`~jobrun.cli.inputs`,
:mod:`~jobrun.cli.rendering` and :mod:`~jobrun.cli.log_setup` (helpers), and
one module per command or command group, each registering its commands on the app when
imported here.

The CLI talks to the database only through :mod:`jobrun.postgres`; it never
imports psycopg or the generated query layer (an import-linter contract).
"""

from __future__ import annotations

# Importing a command module registers its commands on ``app``, and typer lists
# them in registration order, so this order is the order of ``jobrun --help``:
# commands worker, enqueue, events, stats, demo, web; groups migrate, jobs, schedules,
# queues.
# isort: off
from jobrun.cli import migrate  # noqa: F401
from jobrun.cli import worker  # noqa: F401
from jobrun.cli import enqueue  # noqa: F401
from jobrun.cli import jobs  # noqa: F401
from jobrun.cli import schedules  # noqa: F401
from jobrun.cli import queues  # noqa: F401
from jobrun.cli import demo  # noqa: F401
from jobrun.cli import web  # noqa: F401
from jobrun.cli import workers  # noqa: F401
from jobrun.cli import workflows  # noqa: F401

# isort: on
from jobrun.cli.app import (
    EXIT_JOBRUN_ERROR,
    DatabaseUrlOption,
    app,
    main,
    run_with_pool,
    run_with_store,
)
from jobrun.cli.durations import DurationError, format_duration, parse_duration
from jobrun.cli.worker import load_registry

__all__ = [
    "EXIT_JOBRUN_ERROR",
    "DatabaseUrlOption",
    "DurationError",
    "app",
    "format_duration",
    "load_registry",
    "main",
    "parse_duration",
    "run_with_pool",
    "run_with_store",
]
