"""jobrun in a Starlette or FastAPI app: a lifespan, a client, a transaction, the dashboard.

::

    jobs = Jobrun(registry, database_url=url, worker=True)
    app = Starlette(lifespan=jobs.lifespan)   # FastAPI(lifespan=jobs.lifespan) alike
    app.mount("/jobs", jobs.dashboard(authorize=current_user_name))

    async def signup(request):
        async with jobrun_client(request).transaction() as conn:
            await conn.execute("INSERT INTO users ...")
            await jobrun_client(request).enqueue(NewJob(type="welcome"), conn=conn)

FastAPI apps use the same through dependencies (:mod:`jobrun.integrations.fastapi`).

The lifespan opens the :class:`jobrun.Client` as the app starts and closes it
as the app stops. With ``worker=True`` it also runs the client's worker as a
task of the app's event loop; shutdown stops it gracefully (running jobs
finish and are reported) before the client closes. A worker that fails is
logged and leaves the app serving: enqueueing still works, and other worker
processes (``jobrun worker``) still run the jobs.

Logging: servers such as uvicorn configure their own loggers and leave the
root logger without a handler, so jobrun's records below WARNING would be
dropped. When neither the ``jobrun`` logger nor the root logger has a handler
as the app starts, the lifespan gives ``jobrun`` one on stderr at
``log_level`` (INFO unless given), formatted like uvicorn's lines. Configure
logging yourself (``logging.basicConfig``, uvicorn's ``--log-config``) and it
leaves yours alone.

Nothing here imports Starlette until :meth:`Jobrun.dashboard` serves a
request, so the lifespan and the dependencies only use the app's ``state``
and the request's.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from jobrun.client import Client
from jobrun.config import Config
from jobrun.registry import Registry

__all__ = ["Jobrun", "MountedDashboard", "jobrun_client", "jobrun_transaction"]

log = logging.getLogger("jobrun.integrations.starlette")

STATE_KEY = "jobrun"
"""The name the open client goes by in the lifespan state and ``app.state``."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Authorize = Callable[[Any], Any]
"""The host app's check for the mounted dashboard: given the Starlette request, the name
of the user it lets in (a ``str``), ``None`` to refuse with 403, or a response of its own
to send instead (a login redirect, a 401); it may be async."""


class Jobrun:
    """A :class:`jobrun.Client` for an app's lifetime, with an optional in-process worker.

    ``registry``, ``config`` and ``settings`` are the client's (see
    :class:`jobrun.Client`); ``worker=True`` runs its worker while the app
    serves; ``log_level`` is the level of the handler the lifespan gives the
    ``jobrun`` logger when nothing else handles it (see the module's notes).
    Pass :meth:`lifespan` as the app's ``lifespan``.
    """

    def __init__(
        self,
        registry: Registry | None = None,
        config: Config | None = None,
        *,
        worker: bool = False,
        log_level: int | str = logging.INFO,
        **settings: Any,
    ) -> None:
        self._registry = registry
        self._config = config
        self._settings = settings
        self._log_level = log_level
        self._dashboards: list[MountedDashboard] = []
        self.worker = worker
        """Whether the lifespan runs a worker beside the app."""
        self.client: Client | None = None
        """The open client while the app runs; None before it starts and after it stops."""

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[dict[str, Any]]:
        """Open the client (and start the worker), yield to the app, then stop both in order."""
        _show_jobrun_logs(self._log_level)
        async with Client(self._registry, self._config, **self._settings) as client:
            self.client = client
            app.state.jobrun = client
            stop = asyncio.Event()
            task = asyncio.create_task(client.run_worker(stop=stop)) if self.worker else None
            if task is not None:
                task.add_done_callback(_log_failure)
            try:
                yield {STATE_KEY: client}
            finally:
                if task is not None:
                    stop.set()
                    await asyncio.gather(task, return_exceptions=True)
                for dashboard in self._dashboards:
                    await dashboard.close()
                self.client = None

    def dashboard(
        self, *, authorize: Authorize | None = None, read_only: bool = False, **options: Any
    ) -> MountedDashboard:
        """jobrun's dashboard on this app's client, to mount: ``app.mount("/jobs", ...)``.

        ``authorize`` is the host app's own authentication (see
        :data:`Authorize`): every request to the dashboard passes it first, and
        the name it returns is the actor the dashboard's actions record
        (``"<name> via web"``). Without it the dashboard is open to whoever
        reaches the prefix. ``read_only`` and ``options`` are
        :func:`jobrun.web.app.create_app`'s. Links, forms and the CSRF cookie
        follow the mount's prefix. Needs the ``jobrun[web]`` extra.
        """
        mounted = MountedDashboard(self, authorize, read_only=read_only, options=options)
        self._dashboards.append(mounted)
        return mounted


class MountedDashboard:
    """The ASGI app :meth:`Jobrun.dashboard` returns: the dashboard, built on first request."""

    def __init__(
        self,
        owner: Jobrun,
        authorize: Authorize | None,
        *,
        read_only: bool,
        options: dict[str, Any],
    ) -> None:
        self._owner = owner
        self._authorize = authorize
        self._read_only = read_only
        self._options = options
        self._app: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request: the host's check, then the dashboard."""
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse

        if scope["type"] != "http":
            return  # Mount passes no lifespan; the dashboard streams over plain HTTP.
        client = self._owner.client
        if client is None:
            response = PlainTextResponse(
                "jobrun is not running: give the app lifespan=Jobrun(...).lifespan\n", 503
            )
            await response(scope, receive, send)
            return
        if self._authorize is not None:
            answer = self._authorize(Request(scope, receive))
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is None or answer == "":
                await PlainTextResponse("forbidden\n", 403)(scope, receive, send)
                return
            if not isinstance(answer, str):
                await answer(scope, receive, send)
                return
            scope["jobrun.user"] = answer
        if self._app is None:
            from jobrun.web.app import create_app

            self._app = create_app(client, read_only=self._read_only, **self._options)
        await self._app(scope, receive, send)

    async def close(self) -> None:
        """Stop the dashboard's background pieces (its sampler, its LISTEN connection)."""
        app, self._app = self._app, None
        if app is not None:
            await app.state.dashboard.close()


def _show_jobrun_logs(level: int | str) -> None:
    jobrun_log = logging.getLogger("jobrun")
    if jobrun_log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)-9s %(name)s: %(message)s"))
    jobrun_log.addHandler(handler)
    jobrun_log.setLevel(level)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("jobrun's in-process worker stopped", exc_info=task.exception())


def jobrun_client(request: Any) -> Client:
    """The app's open client, for a route: called with the request, or as a dependency.

    ``request`` is the Starlette (or FastAPI) request of an app whose lifespan
    is :meth:`Jobrun.lifespan`.
    """
    # The lifespan state reaches request.state under a server; a bare ASGI
    # transport leaves it out, and app.state holds the same client.
    client = getattr(request.state, STATE_KEY, None) or getattr(request.app.state, STATE_KEY, None)
    if not isinstance(client, Client):
        raise LookupError("no jobrun client: give the app lifespan=Jobrun(...).lifespan")
    return client


async def jobrun_transaction(request: Any) -> AsyncIterator[Any]:
    """A connection in a transaction on the app's client, for a route's rows and its jobs.

    An async generator, as dependency systems take them: the transaction
    commits when the route returns and rolls back when it raises. In FastAPI
    use :data:`jobrun.integrations.fastapi.Transaction`, which also makes the
    commit happen before the response is sent.
    """
    async with jobrun_client(request).transaction() as conn:
        yield conn
