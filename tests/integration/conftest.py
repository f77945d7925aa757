"""A PgBouncer in transaction mode in front of the test server, for the whole session.

Users who run many worker hosts put PgBouncer (``pool_mode = transaction``)
between them and PostgreSQL; ``tests/integration/test_pgbouncer.py`` runs the
worker, the scheduler and fault cases through a real one. The ``pgbouncer``
fixture starts ``pgbouncer`` (Debian's package; ``.ci/run`` installs it) on a
free loopback port with a generated ini and userlist, forwarding every database
name to the session's server (``jobrun_server_url``: the embedded server's Unix
socket or ``$JOBRUN_TEST_DATABASE_URL``), and stops it at the end.

The bouncer is made deliberately unfriendly, so what passes here passes on a
real deployment: a small ``default_pool_size`` (server connections are shared
between many clients), no ``ignore_startup_parameters`` (a client sending
startup ``options`` is refused), and a server time zone other than UTC.

A missing pgbouncer fails the tests that use it: a skip would hide that the
PgBouncer support went untested.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from jobrun.testing import eventually_sync

POOL_SIZE = 4
"""Server connections per database: fewer than the clients, so they are shared."""

SERVER_TIME_ZONE = "America/New_York"
"""The time zone the bouncer asks the server for: jobrun must still hand back UTC."""

_SEARCH = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin")


@dataclass(frozen=True)
class Bouncer:
    """A running PgBouncer: where it listens and how to route a database through it."""

    host: str
    port: int
    user: str
    log: Path

    def url(self, db_url: str) -> str:
        """The URL of ``db_url``'s database through the bouncer (same user, no password)."""
        dbname = conninfo_to_dict(db_url).get("dbname") or "postgres"
        return make_conninfo(
            "", host=self.host, port=str(self.port), dbname=str(dbname), user=self.user
        )

    def log_text(self) -> str:
        """What the bouncer logged so far (for assertion messages)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _find_pgbouncer() -> str:
    found = shutil.which("pgbouncer") or next(
        (f"{d}/pgbouncer" for d in _SEARCH if os.access(f"{d}/pgbouncer", os.X_OK)), None
    )
    if found is None:
        pytest.fail(
            "pgbouncer is not installed (Debian: apt-get install pgbouncer; .ci/run does it); "
            "the PgBouncer tests cannot run without it",
            pytrace=False,
        )
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@pytest.fixture(scope="session")
def pgbouncer(jobrun_server_url: str) -> Iterator[Bouncer]:
    """A PgBouncer in transaction mode in front of the session's test server."""
    binary = _find_pgbouncer()
    with psycopg.connect(jobrun_server_url) as conn:
        # What libpq actually used (defaults and environment filled in).
        host, port, user = conn.info.host, conn.info.port, conn.info.user
        password = conn.info.password
    target = f"host={_quote(host)} port={port} user={_quote(user)}"
    if password:
        target += f" password={_quote(password)}"
    target += f" timezone={SERVER_TIME_ZONE}"

    workdir = Path(tempfile.mkdtemp(prefix="jobrun-pgbouncer-"))
    log = workdir / "pgbouncer.log"
    run_as = None
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root. It must reach the server's socket, so
        # it runs as the socket directory's owner (the embedded server's user),
        # else as nobody.
        run_as = pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"
    (workdir / "userlist.txt").write_text(f'"{user}" ""\n')
    listen_port = _free_port()
    ini = workdir / "pgbouncer.ini"
    ini.write_text(
        "\n".join(
            [
                "[databases]",
                f"* = {target}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {listen_port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {workdir / 'userlist.txt'}",
                "pool_mode = transaction",
                f"default_pool_size = {POOL_SIZE}",
                "min_pool_size = 0",
                "reserve_pool_size = 0",
                "max_client_conn = 1000",
                f"admin_users = {user}",
                # A client waiting this long for a server connection means a leak.
                "query_wait_timeout = 60",
                "log_connections = 0",
                "log_disconnections = 0",
                *([f"user = {run_as}"] if run_as else []),
                "",
            ]
        )
    )
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        for path in (workdir, ini, workdir / "userlist.txt"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, str(ini)], stdout=out, stderr=subprocess.STDOUT)
    bouncer = Bouncer("127.0.0.1", listen_port, user, log)
    try:

        def accepting() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"pgbouncer exited at start:\n{bouncer.log_text()}", pytrace=False)
            try:
                with psycopg.connect(bouncer.url(jobrun_server_url), connect_timeout=2):
                    return True
            except psycopg.OperationalError:
                return False

        try:
            eventually_sync(accepting, what="pgbouncer accepting connections")
        except AssertionError:
            pytest.fail(
                f"pgbouncer did not accept connections:\n{bouncer.log_text()}", pytrace=False
            )
        yield bouncer
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
