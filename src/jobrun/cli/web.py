"""``jobrun web``: serve the dashboard (:mod:`jobrun.web`) with uvicorn.

The dashboard can steer every job, so the command is careful about who can
reach it: it binds to loopback by default, and refuses any other address
unless HTTP Basic credentials are configured (``--user``/``--password`` or
``JOBRUN_WEB_USER``/``JOBRUN_WEB_PASSWORD``). There is no default password.
It logs like ``jobrun worker`` (stderr, text or JSON, INFO by default), so the
dashboard's audit lines (a queue paused, a schedule resumed, and by whom) are
on screen and in the service's log without further setup.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ipaddress
import os
import signal
import socket
from typing import Annotated, Any

import typer

from jobrun.cli.app import (
    DatabaseUrlOption,
    LogFormatOption,
    LogLevelOption,
    ReadUrlOption,
    app,
    fail,
    run_with_client,
)
from jobrun.cli.log_setup import setup_logging
from jobrun.client import Client
from jobrun.domain import SEARCH_ROWS

__all__ = ["is_loopback", "web"]

WEB_EXTRA = "pip install 'jobrun[web]'"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _load(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing in {"starlette", "jinja2", "uvicorn", "multipart", "python_multipart"}:
            raise fail(f"the dashboard needs the {missing} package: {WEB_EXTRA}") from None
        raise


def _listen(host: str, port: int) -> socket.socket:
    """The dashboard's listening socket, bound before anything else starts.

    A port already taken is then one ``error:`` line (exit 2) before the
    command says it serves anything, and ``--port 0`` reports the port the
    system chose.
    """
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        return socket.create_server((address, port), family=family)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise fail(f"cannot listen on {host}:{port}: {reason}") from None


def _stop_on_signals(server: Any) -> None:
    """SIGTERM and SIGINT stop ``server`` gracefully and the command exits 0.

    uvicorn's own handlers raise the signal again once it has shut down, so
    a service manager's SIGTERM would end the process with status 143, as if
    it had been killed; the first signal asks uvicorn to stop, a second one
    makes it stop at once (its own rule).
    """
    server.capture_signals = contextlib.nullcontext
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.handle_exit, sig, None)


@app.command()
def web(
    database_url: DatabaseUrlOption = None,
    read_url: ReadUrlOption = None,
    host: Annotated[
        str,
        typer.Option(
            envvar="JOBRUN_WEB_HOST",
            show_envvar=True,
            help="Address to bind; anything but loopback needs --user and --password.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(envvar="JOBRUN_WEB_PORT", show_envvar=True, help="Port to listen on.")
    ] = 8080,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            envvar="JOBRUN_WEB_READ_ONLY",
            show_envvar=True,
            help="Show everything, change nothing: actions are hidden and refused.",
        ),
    ] = False,
    user: Annotated[
        str | None,
        typer.Option(envvar="JOBRUN_WEB_USER", show_envvar=True, help="HTTP Basic auth user."),
    ] = None,
    password: Annotated[
        str | None,
        typer.Option(
            envvar="JOBRUN_WEB_PASSWORD", show_envvar=True, help="HTTP Basic auth password."
        ),
    ] = None,
    search_rows: Annotated[
        int,
        typer.Option(
            envvar="JOBRUN_WEB_SEARCH_ROWS",
            show_envvar=True,
            min=1,
            help="The most jobs one search of the jobs page examines before it offers to "
            "search further.",
        ),
    ] = SEARCH_ROWS,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
) -> None:
    """Serve the web dashboard: queues, jobs, schedules, with live updates."""
    if not 0 <= port <= 65535:
        raise fail(f"--port must be between 0 and 65535, got {port}")
    if bool(user) != bool(password):
        raise fail("give both --user and --password (JOBRUN_WEB_USER / JOBRUN_WEB_PASSWORD)")
    auth = (user, password) if user and password else None
    if auth is None and not is_loopback(host):
        raise fail(
            f"refusing to serve the dashboard on {host} without auth: "
            "set --user and --password, or bind to 127.0.0.1"
        )
    setup_logging(log_level, log_format)
    web_app = _load("jobrun.web")
    uvicorn = _load("uvicorn")
    listening = _listen(host, port)

    async def serve(client: Client) -> None:
        dashboard = web_app.create_app(
            client, read_only=read_only, auth=auth, search_rows=search_rows
        )
        config = uvicorn.Config(dashboard, host=host, port=port, log_level="warning")
        server = uvicorn.Server(config)
        _stop_on_signals(server)
        mode = " (read-only)" if read_only else ""
        bound = listening.getsockname()[1]
        typer.echo(f"jobrun web: serving on http://{host}:{bound}/{mode}", err=True)
        await server.serve(sockets=[listening])
        typer.echo("jobrun web: stopped", err=True)

    replica: dict[str, Any] = {} if read_url is None else {"read_url": read_url}
    run_with_client(database_url, serve, concurrency=1, **replica)
