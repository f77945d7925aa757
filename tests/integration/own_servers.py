"""PostgreSQL servers a test starts itself, to fail them the way production servers fail.

The shared test server cannot be crashed, filled or failed over without
taking every other test with it, so these tests run their own: Debian's
PostgreSQL server binaries (``/usr/lib/postgresql/<major>/bin``, installed on
the development and CI machines), a data directory in a temporary folder, a
free loopback port, no Unix socket. Run as root, every server command runs as
the ``postgres`` system user (PostgreSQL refuses root).

A server is started with ``pg_ctl start -w``; :meth:`LocalServer.crash` kills
the postmaster and every backend with SIGKILL (a power cut, as far as the
server can tell), and the next start replays the WAL. A standby is a base
backup of a running primary that streams from it; :meth:`LocalServer.promote`
makes it the primary.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg

from jobrun.testing import eventually_sync

__all__ = [
    "LocalServer",
    "children_of",
    "free_port",
    "missing_binaries",
    "server_root",
    "small_volume",
]


def _bin_dir() -> Path | None:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
    )
    return found[-1].parent if found else None


BIN = _bin_dir()


def missing_binaries() -> str | None:
    """Why these tests cannot run here, or None: the server binaries or the user are missing."""
    if BIN is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a postgres system user to run servers as"
    return None


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server_root() -> Iterator[Path]:
    """A temporary folder the servers' user owns, removed afterwards (with the servers in it)."""
    root = Path(tempfile.mkdtemp(prefix="jobrun-servers-"))
    try:
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(root, entry.pw_uid, entry.pw_gid)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def small_volume(where: Path, megabytes: int) -> Iterator[Path]:
    """A tmpfs of ``megabytes`` mounted at ``where`` (root only), owned by the servers' user.

    Raises PermissionError when this process may not mount one.
    """
    where.mkdir()
    if os.geteuid() != 0:
        raise PermissionError("mounting a small volume needs root")
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0755", "tmpfs", str(where)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    try:
        entry = pwd.getpwnam("postgres")
        os.chown(where, entry.pw_uid, entry.pw_gid)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True, timeout=30)


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


class LocalServer:
    """One PostgreSQL cluster in ``root/name``, listening on 127.0.0.1:``port``."""

    def __init__(self, root: Path, name: str, port: int | None = None) -> None:
        self.data = root / name
        self.port = port if port is not None else free_port()
        self.log = root / f"{name}.log"
        self.settings: list[str] = []

    def url(self, dbname: str = "postgres") -> str:
        """A connection URL for ``dbname`` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *argv: str) -> None:
        assert BIN is not None
        subprocess.run(
            _as_server_user([str(BIN / argv[0]), *argv[1:]]),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=120,
        )

    def initdb(self, waldir: Path | None = None) -> None:
        """Create the cluster (trust authentication on loopback, data checksums on).

        ``waldir`` puts the WAL in a folder of its own (another volume than the data).
        """
        wal = ["-X", str(waldir)] if waldir is not None else []
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-k", *wal)
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write("host replication postgres 127.0.0.1/32 trust\n")

    def start(self, *settings: str) -> None:
        """Start the server and wait until it accepts connections (crash recovery included).

        ``settings`` are ``name=value`` pairs given on the command line, so a
        base backup taken from this server does not copy them (a standby must
        not inherit its primary's synchronous_standby_names).
        """
        if settings:
            self.settings = list(settings)
        options = [
            f"-p {self.port}",
            "-c listen_addresses=127.0.0.1",
            "-c unix_socket_directories=''",
            *(f"-c {s}" for s in self.settings),
        ]
        self._run(
            "pg_ctl", "start", "-w", "-t", "120", "-D", str(self.data),
            "-l", str(self.log), "-o", " ".join(options),
        )  # fmt: skip

    def postmaster_pid(self) -> int:
        """The running postmaster's process id, from its pid file."""
        return int((self.data / "postmaster.pid").read_text().splitlines()[0])

    def crash(self) -> None:
        """SIGKILL the postmaster and all of its children at once, as a power cut would."""
        pid = self.postmaster_pid()
        children = children_of(pid)
        for each in [pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGKILL)
        for each in [pid, *children]:
            eventually_sync(lambda each=each: _gone(each), what=f"process {each} killed")
        # The postmaster's parent has exited, and where nothing reaps orphans
        # (a container's init may not) its zombie keeps the pid alive, which
        # the next start takes for a running postmaster. After a real power
        # cut the pid is free: remove the stale pid file as a reboot would.
        (self.data / "postmaster.pid").unlink()

    def stop(self) -> None:
        """Stop the server if it runs (fast shutdown); a crashed one is left as it is."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data))

    def make_standby_of(self, primary: LocalServer) -> None:
        """Fill this (not yet created) cluster with a base backup of ``primary``, streaming.

        ``pg_basebackup -R`` writes standby.signal and the primary's conninfo;
        the standby names itself ``application_name`` = its folder's name, which
        the primary's ``synchronous_standby_names`` may list.
        """
        self._run(
            "pg_basebackup", "-D", str(self.data), "-h", "127.0.0.1", "-p", str(primary.port),
            "-U", "postgres", "-X", "stream", "-R", "-c", "fast",
            "-d", f"application_name={self.data.name}",
        )  # fmt: skip

    def promote(self) -> None:
        """Promote this standby to a primary and wait until it accepts writes."""
        self._run("pg_ctl", "promote", "-w", "-t", "120", "-D", str(self.data))

    def execute(self, query: str, dbname: str = "postgres") -> list[tuple[object, ...]]:
        """Run one statement in autocommit and return its rows (none for a command)."""
        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            cur = conn.execute(query.encode())
            return cur.fetchall() if cur.description else []


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, from /proc (no procps needed)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):  # a process that ended while we read
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _gone(pid: int) -> bool:
    # A SIGKILLed process dies at once, but until its parent (pg_ctl's shell,
    # or this test) reaps it, /proc/<pid>/stat shows it as a zombie (Z).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] == "Z"
    except (FileNotFoundError, IndexError):
        return True
