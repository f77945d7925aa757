"""The dashboard's ASGI application: its routes, built from one table, behind the guard.

The app is put together from rooms, each with its own reason to exist:
:mod:`jobrun.web.guard` (auth, CSRF, read-only, the actor),
:mod:`jobrun.web.actions` (what a POST does to the store, with
:mod:`jobrun.web.schedule_actions` and :mod:`jobrun.web.queue_actions`),
:mod:`jobrun.web.pages` (HTML), :mod:`jobrun.web.api` (JSON),
:mod:`jobrun.web.live` (server-sent events) and
:mod:`jobrun.web.dashboard` (the store, options and background pieces one
app holds). :data:`ROUTES` lists every path once: a view answers GET at its
path; an action answers POST twice, from a page form at its path and as JSON
at the same path under ``/api``.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from jobrun.client import Client
from jobrun.domain import SEARCH_ROWS
from jobrun.web import api, live, pages, stats_page
from jobrun.web.actions import ACTIONS, Action
from jobrun.web.dashboard import Dashboard, WebStore
from jobrun.web.guard import Guard

__all__ = ["ROUTES", "WebStore", "create_app"]

# {name:path}: a queue or schedule name may hold "/" (billing/eu); the pages
# send it percent-encoded and the server hands the route the decoded path, so
# only a converter that matches "/" gets the whole name. The action is always
# the last segment, so the match is unambiguous.
ROUTES: tuple[tuple[str, Any], ...] = (
    ("/", pages.overview),
    ("/fragments/overview", pages.overview_fragment),
    ("/sse/overview", live.overview_stream),
    ("/jobs", pages.jobs),
    ("/jobs/bulk", ACTIONS["bulk"]),
    ("/jobs/{job_id}", pages.job_detail),
    ("/jobs/{job_id}/cancel", ACTIONS["cancel_job"]),
    ("/jobs/{job_id}/retry", ACTIONS["retry_job"]),
    ("/jobs/{job_id}/run-now", ACTIONS["run_job_now"]),
    ("/schedules", pages.schedules),
    ("/schedules/{name:path}/pause", ACTIONS["pause_schedule"]),
    ("/schedules/{name:path}/resume", ACTIONS["resume_schedule"]),
    ("/schedules/new", ACTIONS["create_schedule"]),
    ("/schedules/{name:path}/edit", ACTIONS["edit_schedule"]),
    ("/schedules/{name:path}/run-now", ACTIONS["run_schedule_now"]),
    ("/schedules/{name:path}/delete", ACTIONS["delete_schedule"]),
    ("/queues", pages.queues),
    ("/workers", pages.workers),
    ("/stats", stats_page.stats_page),
    ("/workflows/{job_id}", pages.workflow),
    ("/queues/{name:path}/pause", ACTIONS["pause_queue"]),
    ("/queues/{name:path}/resume", ACTIONS["resume_queue"]),
    ("/queues/{name:path}/limits", ACTIONS["set_queue_limits"]),
    ("/queues/{name:path}/clear-limits", ACTIONS["clear_queue_limits"]),
    ("/queues/{name:path}/drain", ACTIONS["drain_queue"]),
    ("/queues/{name:path}/clear", ACTIONS["clear_queue"]),
    ("/api/csrf", api.csrf),
    ("/api/overview", api.overview),
    ("/api/jobs", api.jobs),
    ("/api/jobs/{job_id}", api.job),
    ("/api/schedules", api.schedules),
    ("/api/queues", api.queues),
    ("/api/workers", api.workers),
    ("/api/stats", stats_page.stats_api),
    ("/api/workflows/{job_id}", api.workflow),
)
"""Every path and what answers it: a view ``f(dashboard, request)``, or an
:class:`~jobrun.web.actions.Action` (POST here from a page, and under ``/api``)."""


def _routes(dash: Dashboard) -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for path, target in ROUTES:
        if isinstance(target, Action):
            from_page = functools.partial(pages.act, dash, target)
            from_api = functools.partial(api.act, dash, target)
            routes.append(Route(path, from_page, methods=["POST"]))
            routes.append(Route("/api" + path, from_api, methods=["POST"]))
        else:
            routes.append(Route(path, functools.partial(target, dash)))
    static = StaticFiles(directory=Path(__file__).parent / "static")
    routes.append(Mount("/static", app=static, name="static"))
    return routes


def create_app(
    source: Client | WebStore,
    *,
    read_only: bool = False,
    auth: tuple[str, str] | None = None,
    database_url: str | None = None,
    notify_channel: str | None = None,
    poll: float = 2.0,
    sample_every: float | None = None,
    search_rows: int = SEARCH_ROWS,
) -> Starlette:
    """The dashboard as an ASGI app, to serve (``jobrun web``) or mount in your own app.

    ``source`` is a :class:`~jobrun.Client` (opened on first use if it is not
    open, and then closed with the app) or any store implementing
    :class:`WebStore`. ``auth=(user, password)`` requires HTTP Basic auth on
    every request. ``read_only=True`` hides every action and refuses it with
    403. Live updates LISTEN on the client's database (or ``database_url`` and
    ``notify_channel`` when given a bare store) and re-read the queues every
    ``poll`` seconds. ``sample_every`` is deprecated and does nothing (a
    DeprecationWarning says so): the throughput lines come from the
    database's rolled-up rows (the Charts page's), not from samples taken by
    each dashboard process.
    A search of the jobs listing examines at most ``search_rows`` jobs a page
    and offers to search further.
    """
    if auth is not None and (not auth[0] or not auth[1]):
        raise ValueError("auth needs a non-empty user and password")
    if search_rows < 1:
        raise ValueError("search_rows must be at least 1")
    if sample_every is not None:
        warnings.warn(
            "create_app(sample_every=) does nothing: the throughput comes from the database",
            DeprecationWarning,
            stacklevel=2,
        )
    dash = Dashboard(
        source,
        read_only=read_only,
        database_url=database_url,
        notify_channel=notify_channel,
        poll=poll,
        search_rows=search_rows,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await dash.close()

    app = Starlette(routes=_routes(dash), lifespan=lifespan)
    app.add_middleware(Guard, auth=auth)
    app.state.dashboard = dash
    return app
