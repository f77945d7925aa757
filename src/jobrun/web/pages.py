"""The dashboard's HTML pages, and the page side of every action.

Pages are Jinja2 templates with autoescaping on for everything, since every
field a job carries (its type, payload, error) is someone else's text.
Listings cut payloads and error lines short (:data:`LIST_PAYLOAD_CHARS`);
the job page shows them whole. A page's form POSTs to an action
(:mod:`jobrun.web.actions`) and is answered with a redirect back to the page
(303) or, when refused, the error page with the refusal's status.

Each view is a function of the app's :class:`~jobrun.web.dashboard.Dashboard`
and the request; :func:`jobrun.web.create_app` binds the dashboard.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote
from uuid import UUID

from jinja2 import Environment, FileSystemLoader, pass_context, select_autoescape
from markupsafe import Markup
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from jobrun._endings import plural
from jobrun.domain import INDEXED_STATES, JobFilter, JobState, queue_name_problem
from jobrun.durations import format_duration
from jobrun.errors import ConfirmationNeeded, JobNotFound
from jobrun.web import formatting, workflow_graph
from jobrun.web.actions import REFUSALS, Action, refusal_status
from jobrun.web.bodies import Unconfirmed, job_result, listing
from jobrun.web.dashboard import Dashboard
from jobrun.web.guard import CSRF_FIELD, actor, check_action
from jobrun.web.queue_actions import drain_state

__all__ = [
    "LIST_PAYLOAD_CHARS",
    "act",
    "base",
    "job_detail",
    "jobs",
    "overview",
    "overview_fragment",
    "queues",
    "render",
    "schedules",
]

LIST_PAYLOAD_CHARS = 120
"""Payloads and error lines longer than this are cut short in the jobs listing (the job page
shows them whole)."""


def base(request: Request) -> str:
    """Where the app is mounted (``""`` at the root): every link and redirect starts with it."""
    return str(request.scope.get("root_path") or "").rstrip("/")


def _segment(value: Any) -> str:
    """``value`` percent-encoded whole, ``/`` included, for one URL path segment or query value.

    A name is data, never path syntax: ``../queues/victim`` must stay one
    segment (``..%2Fqueues%2Fvictim``) so that no browser resolves it into
    another queue's URL. The routes take the decoded name with a ``path``
    converter, so a name holding ``/`` arrives whole.
    """
    return quote(str(value), safe="")


_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    enable_async=False,
)
_env.filters["short_payload"] = lambda value: formatting.short_payload(value, LIST_PAYLOAD_CHARS)
_env.filters["pretty"] = formatting.pretty
_env.filters["duration"] = formatting.duration
_env.filters["error_line"] = lambda value: formatting.error_line(value, LIST_PAYLOAD_CHARS)
_env.filters["short_id"] = formatting.short_id
_env.filters["absolute"] = formatting.absolute

_env.filters["duration_text"] = format_duration  # as the every field reads it back
_env.filters["json_text"] = lambda value: json.dumps(value, ensure_ascii=False)  # escaped after


@pass_context
def _when(context: Any, value: datetime | None, now: datetime | None = None) -> Markup:
    """A time relative to ``now`` (by default the page's), its absolute form in the title."""
    return formatting.when(value, now or context["now"])


@pass_context
def _when_full(context: Any, value: datetime | None, now: datetime | None = None) -> Markup:
    """As ``when``, with the absolute time shown beside the relative one too."""
    return formatting.when(value, now or context["now"], full=True)


_env.filters["when"] = _when
_env.filters["when_full"] = _when_full
# Not Jinja's urlencode, which leaves "/" as it is: see _segment.
_env.filters["segment"] = _segment
_env.globals["queue_name_problem"] = queue_name_problem
_env.globals["drain_state"] = drain_state


def render(
    dash: Dashboard, request: Request, name: str, status: int = 200, **context: Any
) -> Response:
    """The template ``name`` as an HTML response, with what every page shows around it.

    Times on the page are relative to ``now``: the moment of rendering unless given.
    """
    context.setdefault("now", datetime.now(UTC))
    html = _env.get_template(name).render(
        base=base(request),
        csrf=request.scope.get("jobrun.csrf", ""),
        user=request.scope.get("jobrun.user", "anonymous"),
        read_only=dash.read_only,
        replica_note=dash.replica_note,
        current=name.removesuffix(".html"),
        **context,
    )
    return HTMLResponse(html, status_code=status)


async def overview(dash: Dashboard, request: Request) -> Response:
    """The overview: one row per queue with its counts, lag and throughput chart."""
    rows = await dash.overview_data()
    return render(dash, request, "overview.html", rows=rows, spark=formatting.sparkline)


async def overview_fragment(dash: Dashboard, request: Request) -> Response:
    """The overview's table alone, which the page fetches again on each live update."""
    rows = await dash.overview_data()
    return render(dash, request, "_overview_table.html", rows=rows, spark=formatting.sparkline)


async def jobs(dash: Dashboard, request: Request) -> Response:
    """The jobs listing under the query's filter and search, 50 a page.

    A search by id that finds exactly one job, having searched every job its
    id could be, goes straight to that job's page.
    """
    store = await dash.reader()
    params = request.query_params
    try:
        flt, cursor = listing(params)
    except ValueError as exc:
        return render(dash, request, "error.html", 400, message=str(exc))
    page = await store.list_jobs(flt, limit=50, cursor=cursor, search_rows=dash.search_rows)
    by_id = flt.id_prefix is not None or flt.id_suffix is not None
    if by_id and cursor is None and len(page.jobs) == 1 and page.next_cursor is None:
        return RedirectResponse(f"{base(request)}/jobs/{page.jobs[0].id}", status_code=303)
    running = [job.id for job in page.jobs if job.state is JobState.LEASED]
    progress = await store.progress_of(running)
    query = {k: v for k, v in params.items() if k != "cursor" and v}
    states = [s.value for s in JobState]
    # The tabs keep the other filters and the search, and change the state (and drop the cursor).
    others = {k: v for k, v in query.items() if k != "state"}
    return render(
        dash,
        request,
        "jobs.html",
        page=page,
        progress=progress,
        query=query,
        states=states,
        flt=params,
        counts=(await store.state_counts()).by_state(),
        others=others,
        searching=flt.searches,
        searched=_searched(flt, cursor is not None, dash.search_rows),
    )


def _searched(flt: JobFilter, further: bool, rows: int) -> str:
    """What a search that stopped at its bound examined, in words: "the 50,000 newest jobs"."""
    which = "next" if further else "newest"
    state = flt.state.value if flt.state is not None else None
    walked = f"{state} jobs" if state in INDEXED_STATES else "jobs"
    within = " in the id range given" if flt.id_prefix is not None else ""
    return f"the {which} {rows:,} {walked}{within}"


async def job_detail(dash: Dashboard, request: Request) -> Response:
    """One job whole, with its events."""
    store = await dash.reader()
    try:
        job = await store.get(UUID(request.path_params["job_id"]))
    except (JobNotFound, ValueError) as exc:
        return render(dash, request, "error.html", 404, message=str(exc))
    events = await store.events(job.id)
    progress = (await store.progress_of([job.id])).get(job.id)
    result = await job_result(store, job)
    try:
        # One step read past the job itself says whether anything is linked to it.
        linked = not (await store.workflow(job.id, max_steps=1)).complete
    except JobNotFound:  # deleted since it was read
        linked = False
    return render(
        dash,
        request,
        "job.html",
        job=job,
        events=events,
        progress=progress,
        result=result,
        in_workflow=linked,
        now=datetime.now(UTC),  # whether "Run now" applies: a queued job not due yet
    )


async def workflow(dash: Dashboard, request: Request) -> Response:
    """The workflow a job belongs to: its steps drawn by level, then listed."""
    store = await dash.reader()
    try:
        job_id = UUID(request.path_params["job_id"])
        found = await store.workflow(job_id)
    except (JobNotFound, ValueError) as exc:
        return render(dash, request, "error.html", 404, message=str(exc))
    waits: dict[UUID, int] = {}
    for edge in found.edges:
        waits[edge.job_id] = waits.get(edge.job_id, 0) + 1
    return render(
        dash,
        request,
        "workflow.html",
        job_id=job_id,
        workflow=found,
        levels=found.levels(),
        waits=waits,
        graph=workflow_graph.layout(found),
        box_width=workflow_graph.BOX_WIDTH,
        box_height=workflow_graph.BOX_HEIGHT,
    )


SCHEDULES_PAGE = 100
"""Schedules the Schedules page shows at once; the next page starts after the last name."""


async def schedules(dash: Dashboard, request: Request) -> Response:
    """A page of schedules by name (``?after=`` the last name of the page before), with
    their controls."""
    store = await dash.reader()
    after = request.query_params.get("after") or None
    page = await store.list_schedules(after=after, limit=SCHEDULES_PAGE + 1)
    more = len(page) > SCHEDULES_PAGE
    shown = page[:SCHEDULES_PAGE]
    return render(
        dash,
        request,
        "schedules.html",
        schedules=shown,
        after=after,
        next_after=shown[-1].name if more else None,
    )


async def queues(dash: Dashboard, request: Request) -> Response:
    """Every queue with controls, and its limits."""
    store = await dash.reader()
    return render(dash, request, "queues.html", queues=await store.list_queues())


async def workers(dash: Dashboard, request: Request) -> Response:
    """The worker processes, alive or gone, with the jobs each runs."""
    store = await dash.reader()
    return render(dash, request, "workers.html", workers=await store.workers())


def _asking(
    exc: ConfirmationNeeded | Unconfirmed, action: Action, request: Request
) -> dict[str, Any]:
    """What the confirmation page says and where it posts: a bulk delete's, or the action's."""
    if isinstance(exc, Unconfirmed):
        return {
            "title": exc.title,
            "detail": exc.detail,
            "confirm": exc.confirm,
            "target": action.again(request.path_params),
            "back": action.back(None, {}),
            "button": exc.title.removesuffix("?"),
            "keep": "Keep it" if isinstance(exc.confirm, str) else "Keep them",
        }
    jobs = plural(exc.count, "job")
    return {
        "title": f"Delete {jobs}?",
        "detail": (
            f"This deletes {jobs} with {'their' if exc.count != 1 else 'its'} events and"
            " results. It cannot be undone. Running jobs are skipped: cancel them first."
        ),
        "confirm": exc.count,
        "target": action.again(request.path_params),
        "back": "/jobs",
        "button": f"Delete {jobs}",
        "keep": "Keep them",
    }


async def act(dash: Dashboard, action: Action, request: Request) -> Response:
    """A page form's POST: run ``action`` and redirect back (303), or show the refusal."""
    try:
        form = await request.form()
        check_action(request, dash.read_only, form)
        store = await dash.store()
        given = action.form(FormData([(k, v) for k, v in form.multi_items() if k != CSRF_FIELD]))
        done = await action.run(store, **request.path_params, **given, actor=actor(request))
    except (ConfirmationNeeded, Unconfirmed) as exc:
        # Ask, with the same form again and what to confirm (nothing was deleted).
        fields = [(k, v) for k, v in form.multi_items() if k not in (CSRF_FIELD, "confirm")]
        return render(dash, request, "confirm.html", fields=fields, **_asking(exc, action, request))
    except REFUSALS as exc:
        return render(dash, request, "error.html", refusal_status(exc), message=str(exc))
    return RedirectResponse(base(request) + action.back(done, form), status_code=303)
