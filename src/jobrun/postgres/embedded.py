"""A PostgreSQL server that needs no setup, for the demo, first steps and the tests.

Backed by the ``pgserver`` wheel (the optional ``jobrun[embedded]`` extra), which
bundles PostgreSQL binaries. pgserver keeps one server per data directory and
shares it across processes: the first user starts it, later ones reuse it, and
it stops when the last process using it exits. The data stays on disk, in a
per-user directory (``~/.local/share/jobrun/pgdata``, or ``$JOBRUN_EMBEDDED_DIR``).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from jobrun.errors import ConfigurationError

__all__ = ["default_embedded_dir", "embedded_database_url", "start_embedded_server"]


def default_embedded_dir() -> Path:
    """Where the embedded server keeps its data: ``$JOBRUN_EMBEDDED_DIR`` or a per-user dir."""
    configured = os.environ.get("JOBRUN_EMBEDDED_DIR")
    if configured:
        return Path(configured).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "jobrun" / "pgdata"


def embedded_database_url(data_dir: Path | None = None, *, database: str | None = None) -> str:
    """Start (or join) the embedded server for ``data_dir`` and return its connection URL.

    The URL points at a Unix socket; the server stops when the last process that
    asked for it exits. Raises ConfigurationError when pgserver is not installed.
    """
    directory = (data_dir or default_embedded_dir()).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    server = start_embedded_server(
        directory,
        cleanup_mode="stop",
        missing="no database configured and the embedded server is not installed: "
        "pass --database-url or set JOBRUN_DATABASE_URL, or pip install 'jobrun[embedded]'",
    )
    return str(server.get_uri(database))


def start_embedded_server(directory: Path, *, cleanup_mode: str, missing: str) -> Any:
    """Start (or join) pgserver's server for ``directory``; return pgserver's handle.

    ``cleanup_mode`` is pgserver's (``"stop"`` keeps the data, ``"delete"``
    removes it). Raises ConfigurationError with ``missing`` when pgserver is
    not installed, and naming ``directory`` when the server does not start.
    """
    try:
        with warnings.catch_warnings():
            # pgserver asks platformdirs for XDG_RUNTIME_DIR, unset in containers; harmless.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            import pgserver
    except ImportError:
        raise ConfigurationError(missing) from None
    try:
        return pgserver.get_server(directory, cleanup_mode=cleanup_mode)
    except Exception as exc:  # pgserver raises plain subprocess and OS errors
        raise ConfigurationError(
            f"could not start the embedded PostgreSQL in {directory}: {exc}"
        ) from exc
