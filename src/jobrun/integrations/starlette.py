"""A Starlette or FastAPI app's lifespan opening a jobrun Client, and a worker beside it.

::

    jobs = Jobrun(registry, database_url=url, worker=True)
    app = FastAPI(lifespan=jobs.lifespan)  # or Starlette(lifespan=jobs.lifespan)

    @app.post("/signup")
    async def signup(client: Client = Depends(jobrun_client)): ...

The lifespan opens the :class:`jobrun.Client` as the app starts and closes it
as the app stops. With ``worker=True`` it also runs the client's worker as a
task of the app's event loop; shutdown stops it gracefully (running jobs
finish and are reported) before the client closes. A worker that fails is
logged and leaves the app serving: enqueueing still works, and other worker
processes (``jobrun worker``) still run the jobs.

Nothing here imports Starlette: the lifespan and the dependency only use the
app's ``state`` and the request's, so the extra ``jobrun[fastapi]`` only pins
the framework versions this is tested with.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from jobrun.client import Client
from jobrun.config import Config
from jobrun.registry import Registry

__all__ = ["Jobrun", "jobrun_client"]

log = logging.getLogger("jobrun.integrations.starlette")

STATE_KEY = "jobrun"
"""The name the open client goes by in the lifespan state and ``app.state``."""


class Jobrun:
    """A :class:`jobrun.Client` for an app's lifetime, with an optional in-process worker.

    ``registry``, ``config`` and ``settings`` are the client's (see
    :class:`jobrun.Client`); ``worker=True`` runs its worker while the app
    serves. Pass :meth:`lifespan` as the app's ``lifespan``.
    """

    def __init__(
        self,
        registry: Registry | None = None,
        config: Config | None = None,
        *,
        worker: bool = False,
        **settings: Any,
    ) -> None:
        self._registry = registry
        self._config = config
        self._settings = settings
        self.worker = worker
        """Whether the lifespan runs a worker beside the app."""
        self.client: Client | None = None
        """The open client while the app runs; None before it starts and after it stops."""

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[dict[str, Any]]:
        """Open the client (and start the worker), yield to the app, then stop both in order."""
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
                self.client = None


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("jobrun's in-process worker stopped", exc_info=task.exception())


def jobrun_client(request: Any) -> Client:
    """The app's open client, for a route: FastAPI's ``Depends(jobrun_client)``, or called.

    ``request`` is the Starlette (or FastAPI) request of an app whose lifespan
    is :meth:`Jobrun.lifespan`.
    """
    # The lifespan state reaches request.state under a server; a bare ASGI
    # transport leaves it out, and app.state holds the same client.
    client = getattr(request.state, STATE_KEY, None) or getattr(request.app.state, STATE_KEY, None)
    if not isinstance(client, Client):
        raise LookupError("no jobrun client: give the app lifespan=Jobrun(...).lifespan")
    return client
