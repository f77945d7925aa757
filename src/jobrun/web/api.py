"""The dashboard's JSON API under ``/api``: the pages' data, and the API side of every action.

For scripts and tools that would rather not scrape HTML: every page has a
JSON twin, and every action a page offers is also a POST here taking a JSON
object (or no body) with the CSRF token in an ``X-CSRF-Token`` header (read
it from ``/api/csrf``). An action answers with the changed job, queue or
schedule, or ``{"error": "<one line>"}`` with the refusal's status.

Each view is a function of the app's :class:`~jobrun.web.dashboard.Dashboard`
and the request; :func:`jobrun.web.create_app` binds the dashboard.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobrun.domain import WorkerInfo, parse_job_id
from jobrun.errors import ConfirmationNeeded, JobNotFound
from jobrun.web.actions import REFUSALS, Action, refusal_status
from jobrun.web.bodies import Unconfirmed, job_result, json_body, listing
from jobrun.web.dashboard import Dashboard
from jobrun.web.guard import actor, check_action

__all__ = ["REPLICA_HEADER", "act", "csrf", "job", "jobs", "overview", "queues", "schedules"]


def _jsonable(value: Any) -> Any:
    """A model as JSON data; an action's plain answer (a bulk summary) as it is."""
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


async def csrf(dash: Dashboard, request: Request) -> Response:
    """The CSRF token to send back in the ``X-CSRF-Token`` header of every POST."""
    return JSONResponse({"token": request.scope.get("jobrun.csrf"), "header": "X-CSRF-Token"})


async def overview(dash: Dashboard, request: Request) -> Response:
    """The overview's rows, and whether the dashboard is read-only."""
    return _read(dash, {"queues": await dash.overview_data(), "read_only": dash.read_only})


JOBS_LIMIT = 500
"""The most jobs one answer of ``/api/jobs`` holds (``limit`` 1 to this)."""


async def jobs(dash: Dashboard, request: Request) -> Response:
    """A page of jobs under the query's filter and search (``limit`` 1 to 500, 50 by default;
    a larger limit is served as 500, one of 0 or below refused).

    A search (``id``, ``error``, ``payload``) examines at most the dashboard's
    ``search_rows`` jobs: ``scan_cut`` true says it stopped there, and
    ``next_cursor`` continues it.
    """
    store = await dash.reader()
    params = request.query_params
    try:
        flt, cursor = listing(params)
        limit = _page_size(params.get("limit", "50"), JOBS_LIMIT)
    except ValueError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    page = await store.list_jobs(flt, limit=limit, cursor=cursor, search_rows=dash.search_rows)
    answer = _jsonable(page)
    if flt.searches:
        # How many jobs a search examines at most: what scan_cut refers to.
        answer["search_rows"] = dash.search_rows
    return _read(dash, answer)


async def job(dash: Dashboard, request: Request) -> Response:
    """One job and its events."""
    store = await dash.reader()
    try:
        found = await store.get(parse_job_id(request.path_params["job_id"]))
    except (JobNotFound, ValueError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=404)
    events = await store.events(found.id)
    progress = (await store.progress_of([found.id])).get(found.id)
    result = await job_result(store, found)
    return _read(
        dash,
        {
            "job": _jsonable(found),
            "events": [_jsonable(e) for e in events],
            "progress": None if progress is None else _jsonable(progress),
            "result": result,
        },
    )


SCHEDULES_LIMIT = 500
"""The most schedules one answer of ``/api/schedules`` holds (``limit`` 1 to this)."""


async def schedules(dash: Dashboard, request: Request) -> Response:
    """Schedules by name: up to ``limit`` (500 by default and at most; 0 or below is
    refused) after the name ``after``; ask again after the last name for the rest."""
    store = await dash.reader()
    params = request.query_params
    try:
        limit = _page_size(params.get("limit", str(SCHEDULES_LIMIT)), SCHEDULES_LIMIT)
    except ValueError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    found = await store.list_schedules(after=params.get("after") or None, limit=limit)
    return _read(dash, [_jsonable(s) for s in found])


async def queues(dash: Dashboard, request: Request) -> Response:
    """Every queue with controls."""
    store = await dash.reader()
    return _read(dash, [_jsonable(q) for q in await store.list_queues()])


async def workers(dash: Dashboard, request: Request) -> Response:
    """The worker processes, alive or gone, with the jobs each runs."""
    store = await dash.reader()
    return _read(dash, _WORKERS.dump_python(await store.workers(), mode="json"))


_WORKERS: TypeAdapter[list[WorkerInfo]] = TypeAdapter(list[WorkerInfo])


async def workflow(dash: Dashboard, request: Request) -> Response:
    """The workflow a job belongs to: its steps by level, its edges, its counts."""
    store = await dash.reader()
    try:
        found = await store.workflow(parse_job_id(request.path_params["job_id"]))
    except (JobNotFound, ValueError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=404)
    return _read(dash, found.as_json())


async def act(dash: Dashboard, action: Action, request: Request) -> Response:
    """An API POST: run ``action`` and answer with what it changed, or the refusal."""
    try:
        check_action(request, dash.read_only)
        body = await json_body(request)
        store = await dash.store()
        given = action.body(body)
        done = await action.run(store, **request.path_params, **given, actor=actor(request))
    except REFUSALS as exc:
        answer: dict[str, Any] = {"error": str(exc)}
        if isinstance(exc, ConfirmationNeeded):
            answer["confirm"] = exc.count
        elif isinstance(exc, Unconfirmed):
            answer["confirm"] = exc.confirm
        return JSONResponse(answer, status_code=refusal_status(exc))
    return JSONResponse(_jsonable(done))


REPLICA_HEADER = "X-Jobrun-Replica"
"""The header on an API read served by a replica: how far behind the primary it was."""


def _read(dash: Dashboard, content: Any) -> JSONResponse:
    """A read's answer; when it came from a replica, with :data:`REPLICA_HEADER` saying so."""
    headers = {REPLICA_HEADER: dash.replica_note} if dash.replica_note else None
    return JSONResponse(content, headers=headers)


def _page_size(text: str, most: int) -> int:
    """``limit``'s ``text`` as a page size: at least 1, and ``most`` when above it.

    A limit of 0 or below asks for nothing a page can hold, so it is refused
    (ValueError naming ``limit`` and the value) rather than read as 1; one
    above ``most`` is served as ``most``, and the caller pages on.
    """
    try:
        size = int(text)
    except ValueError:
        raise ValueError(f"limit must be a whole number, not {text[:60]!r}") from None
    if size < 1:
        raise ValueError(f"limit must be at least 1, not {size}")
    return min(size, most)
