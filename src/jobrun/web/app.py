"""The dashboard's ASGI application: pages, a JSON API, live updates and their guards.

Why it is built this way:

* Everything goes through the ports (:class:`WebStore` is ``Admin`` plus
  ``ScheduleStore``), never SQL: the dashboard can only do what an operator
  at the CLI can do, and the store keeps every decision.
* Safety is the default: HTTP Basic auth when credentials are given, a
  read-only mode that hides *and* refuses actions, a CSRF token (double
  submit: a cookie plus a form field or ``X-CSRF-Token`` header) on every
  POST, Jinja2 autoescaping for everything a job carries, and payloads cut
  short in listings. Every action names its actor (the authenticated user,
  ``anonymous`` without auth): a job action in the job's events; a queue or
  schedule action, which has no job to attach an event to, in the changed
  row's ``changed_by`` (its last change only) and in an INFO line of the
  ``jobrun.web`` logger (``jobrun web`` logs to stderr), which keeps them all.
* Live updates ride server-sent events. A producer's NOTIFY (through
  :class:`~jobrun.postgres.Notifier`) wakes the stream at once; because
  completions send no notification, the stream also re-reads the queues
  every ``poll`` seconds, and only sends an event when what it shows changed.
* Throughput has no table of its own: a small in-process sampler reads the
  per-state counts every ``sample_every`` seconds and keeps the last
  minutes of finished-job deltas for the overview's chart.
* Mounted under another app, Starlette runs no sub-app lifespan, so every
  background piece (opening a :class:`~jobrun.Client`, the sampler, the
  notifier) starts lazily on first use.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import quote, urlencode
from uuid import UUID

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from jobrun.client import Client
from jobrun.domain import Job, JobFilter, JobState, queue_name_problem
from jobrun.errors import (
    InvalidTransition,
    JobNotFound,
    JobrunError,
    ScheduleNotFound,
)
from jobrun.ports import Admin, ScheduleStore
from jobrun.postgres import Notifier
from jobrun.web.bodies import (
    BadRequest,
    bulk_from_body,
    bulk_from_form,
    job_filter,
    json_body,
    limits,
    no_fields,
)

__all__ = ["WebStore", "create_app"]

HERE = Path(__file__).parent
CSRF_COOKIE = "jobrun_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
LIST_PAYLOAD_CHARS = 120
"""Payloads and error lines longer than this are cut short in the jobs listing (the job page
shows them whole)."""
BULK_FILTER_LIMIT = 10_000
"""A bulk action over a whole filter touches at most this many jobs per request."""
FINISHED = (JobState.SUCCEEDED, JobState.DEAD)
_log = logging.getLogger("jobrun.web")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class WebStore(Admin, ScheduleStore, Protocol):
    """What the dashboard needs from storage: the admin and schedule ports."""


class _Guard:
    """HTTP Basic auth and the CSRF cookie, as one ASGI middleware around the app."""

    def __init__(self, app: ASGIApp, auth: tuple[str, str] | None) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        user = "anonymous"
        if self.auth is not None:
            given = _basic_credentials(headers.get("authorization", ""))
            if given is None or not _same_credentials(given, self.auth):
                response = PlainTextResponse(
                    "authentication required\n",
                    status_code=401,
                    headers={"WWW-Authenticate": 'Basic realm="jobrun", charset="UTF-8"'},
                )
                await response(scope, receive, send)
                return
            user = given[0]
        scope["jobrun.user"] = user
        token = _cookie(headers.get("cookie", ""), CSRF_COOKIE)
        new_token = None
        if token is None or len(token) < 32:
            token = new_token = secrets.token_urlsafe(32)
        scope["jobrun.csrf"] = token
        path = (scope.get("root_path") or "") or "/"

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                extra = [
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin"),
                ]
                if new_token is not None:
                    cookie = f"{CSRF_COOKIE}={new_token}; Path={path}; HttpOnly; SameSite=Strict"
                    extra.append((b"set-cookie", cookie.encode("latin-1")))
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _basic_credentials(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def _same_credentials(given: tuple[str, str], expected: tuple[str, str]) -> bool:
    user_ok = secrets.compare_digest(given[0].encode(), expected[0].encode())
    password_ok = secrets.compare_digest(given[1].encode(), expected[1].encode())
    return user_ok and password_ok


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None


class _Throughput:
    """Finished jobs per sample interval and queue, for the last ``keep`` samples."""

    def __init__(self, keep: int = 60) -> None:
        self.keep = keep
        self.totals: dict[str, int] = {}
        self.series: dict[str, deque[int]] = {}

    def add(self, finished_by_queue: dict[str, int]) -> None:
        for queue, total in finished_by_queue.items():
            previous = self.totals.get(queue)
            series = self.series.setdefault(queue, deque([0] * self.keep, maxlen=self.keep))
            # A purge makes the total fall: count that sample as zero, not negative.
            series.append(0 if previous is None else max(0, total - previous))
            self.totals[queue] = total

    def points(self, queue: str) -> list[int]:
        return list(self.series.get(queue, [0] * self.keep))


def _sparkline(values: list[int], width: int = 120, height: int = 24) -> str:
    """An inline SVG polyline of ``values``; numbers only, so nothing to escape."""
    top = max(values) or 1
    step = width / max(len(values) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - 1 - (v / top) * (height - 2):.1f}" for i, v in enumerate(values)
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="finished jobs per interval, peak {top}">'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{points}"/></svg>'
    )


class _Dashboard:
    """The state one app holds: its store source, options and background pieces."""

    def __init__(
        self,
        source: Client | WebStore,
        *,
        read_only: bool,
        database_url: str | None,
        notify_channel: str | None,
        poll: float,
        sample_every: float,
    ) -> None:
        self.source = source
        self.read_only = read_only
        self.database_url = database_url
        self.notify_channel = notify_channel
        self.poll = poll
        self.sample_every = sample_every
        self.throughput = _Throughput()
        self._opened_client = False
        self._start_lock = asyncio.Lock()
        self._sampler: asyncio.Task[None] | None = None
        self._notifier: Notifier | None = None
        self._notifier_failed = False
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            enable_async=False,
        )
        self.env.filters["ts"] = _fmt_time
        self.env.filters["short_payload"] = _short_payload
        self.env.filters["pretty"] = _pretty
        self.env.filters["duration"] = _fmt_duration
        self.env.filters["error_line"] = _error_line
        # Not Jinja's urlencode, which leaves "/" as it is: see _segment.
        self.env.filters["segment"] = _segment
        self.env.globals["queue_name_problem"] = queue_name_problem

    async def store(self) -> WebStore:
        """The store, opening the client (once) when the app was given a closed one."""
        if isinstance(self.source, Client):
            if self.source._store is None:
                async with self._start_lock:
                    if self.source._store is None:
                        await self.source.open()
                        self._opened_client = True
            store = cast(WebStore, self.source.store)
        else:
            store = self.source
        if self._sampler is None:
            self._sampler = asyncio.create_task(self._sample(), name="jobrun-web-sampler")
        return store

    async def notifier(self) -> Notifier | None:
        """The LISTEN connection, started on the first live stream; None without a database URL."""
        if self._notifier is not None or self._notifier_failed:
            return self._notifier
        url, channel = self.database_url, self.notify_channel
        if isinstance(self.source, Client):
            await self.store()
            # None behind PgBouncer without a direct URL: poll only.
            url = url or self.source.listen_url
            channel = channel or self.source.store.notify_channel
        if url is None:
            self._notifier_failed = True
            return None
        async with self._start_lock:
            if self._notifier is None:
                try:
                    self._notifier = await Notifier.start(
                        url, channel or "jobrun", application_name="jobrun-web"
                    )
                except JobrunError:
                    # Live updates fall back to polling; the pages still work.
                    self._notifier_failed = True
        return self._notifier

    async def _sample(self) -> None:
        while True:
            if isinstance(self.source, Client) and self.source._store is None:
                return  # the client was closed under us: nothing left to sample
            with contextlib.suppress(Exception):
                store = await self.store()
                finished: dict[str, int] = {}
                for row in await store.depth():
                    finished.setdefault(row.queue, 0)
                    if row.state in FINISHED:
                        finished[row.queue] += row.count
                self.throughput.add(finished)
            await asyncio.sleep(self.sample_every)

    async def close(self) -> None:
        """Stop the sampler and the notifier; close the client if this app opened it."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            await notifier.close()
        if self._opened_client and isinstance(self.source, Client):
            await self.source.close()
            self._opened_client = False

    # -- rendering ------------------------------------------------------------------------

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        template = self.env.get_template(name)
        html = template.render(
            base=_base(request),
            csrf=request.scope.get("jobrun.csrf", ""),
            user=request.scope.get("jobrun.user", "anonymous"),
            read_only=self.read_only,
            current=name.removesuffix(".html"),
            **context,
        )
        return HTMLResponse(html, status_code=status)

    async def overview_data(self) -> list[dict[str, Any]]:
        store = await self.store()
        stats = {s.queue: s for s in await store.queue_stats()}
        queues = {q.name: q for q in await store.list_queues()}
        depth: dict[str, dict[str, int]] = {}
        for row in await store.depth():
            depth.setdefault(row.queue, {})[row.state.value] = row.count
        rows = []
        for name in sorted(set(stats) | set(queues) | set(depth)):
            s, q = stats.get(name), queues.get(name)
            counts = depth.get(name, {})
            rows.append(
                {
                    "queue": name,
                    "queued": s.queued if s else counts.get("queued", 0),
                    "due": s.due if s else 0,
                    "leased": s.leased if s else counts.get("leased", 0),
                    "succeeded": counts.get("succeeded", 0),
                    "dead": counts.get("dead", 0),
                    "cancelled": counts.get("cancelled", 0),
                    "lag_seconds": s.lag.total_seconds() if s else 0.0,
                    "paused": q.paused if q else False,
                    "throughput": self.throughput.points(name),
                }
            )
        return rows


def _base(request: Request) -> str:
    return str(request.scope.get("root_path") or "").rstrip("/")


def _fmt_time(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _fmt_duration(value: timedelta | float | None) -> str:
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _segment(value: Any) -> str:
    """``value`` percent-encoded whole, ``/`` included, for one URL path segment or query value.

    A name is data, never path syntax: ``../queues/victim`` must stay one
    segment (``..%2Fqueues%2Fvictim``) so that no browser resolves it into
    another queue's URL. The routes take the decoded name with a ``path``
    converter, so a name holding ``/`` arrives whole.
    """
    return quote(str(value), safe="")


def _error_line(value: str | None) -> str:
    """The line of a stored error that says what failed: a traceback's last, cut short in lists."""
    lines = [line.strip() for line in (value or "").splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    return line if len(line) <= LIST_PAYLOAD_CHARS else line[: LIST_PAYLOAD_CHARS - 1] + "…"


def _short_payload(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= LIST_PAYLOAD_CHARS else text[: LIST_PAYLOAD_CHARS - 1] + "…"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _actor(request: Request) -> str:
    return f"{request.scope.get('jobrun.user', 'anonymous')} via web"


def _audit(request: Request, action: str) -> None:
    _log.info("%s by %s", action, _actor(request))


def _jsonable(model: Any) -> Any:
    return model.model_dump(mode="json")


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def create_app(
    source: Client | WebStore,
    *,
    read_only: bool = False,
    auth: tuple[str, str] | None = None,
    database_url: str | None = None,
    notify_channel: str | None = None,
    poll: float = 2.0,
    sample_every: float = 10.0,
) -> Starlette:
    """The dashboard as an ASGI app, to serve (``jobrun web``) or mount in your own app.

    ``source`` is a :class:`~jobrun.Client` (opened on first use if it is not
    open, and then closed with the app) or any store implementing
    :class:`WebStore`. ``auth=(user, password)`` requires HTTP Basic auth on
    every request. ``read_only=True`` hides every action and refuses it with
    403. Live updates LISTEN on the client's database (or ``database_url`` and
    ``notify_channel`` when given a bare store) and re-read the queues every
    ``poll`` seconds; the throughput chart samples every ``sample_every``.
    """
    if auth is not None and (not auth[0] or not auth[1]):
        raise ValueError("auth needs a non-empty user and password")
    dash = _Dashboard(
        source,
        read_only=read_only,
        database_url=database_url,
        notify_channel=notify_channel,
        poll=poll,
        sample_every=sample_every,
    )

    async def guard_action(request: Request, form: Any | None = None) -> None:
        if dash.read_only:
            raise _Refused(403, "the dashboard is read-only")
        expected = request.scope.get("jobrun.csrf", "")
        cookie = _cookie(request.headers.get("cookie", ""), CSRF_COOKIE)
        given = request.headers.get(CSRF_HEADER) or (form.get(CSRF_FIELD) if form else None)
        if (
            not cookie
            or not given
            or not secrets.compare_digest(str(given).encode(), cookie.encode())
            or not secrets.compare_digest(cookie.encode(), str(expected).encode())
        ):
            raise _Refused(403, "missing or wrong CSRF token")

    def page_action(
        handler: Callable[[Request, Any, WebStore], Awaitable[str]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                form = await request.form()
                await guard_action(request, form)
                target = await handler(request, form, await dash.store())
            except _Refused as exc:
                return dash.render(request, "error.html", exc.status, message=exc.message)
            except BadRequest as exc:
                return dash.render(request, "error.html", exc.status, message=str(exc))
            except (JobNotFound, ScheduleNotFound) as exc:
                return dash.render(request, "error.html", 404, message=str(exc))
            except ValueError as exc:  # bad input (jobrun's own input errors are ValueErrors)
                return dash.render(request, "error.html", 400, message=str(exc))
            except (InvalidTransition, JobrunError) as exc:
                return dash.render(request, "error.html", 409, message=str(exc))
            return RedirectResponse(_base(request) + target, status_code=303)

        return endpoint

    def api_action(
        handler: Callable[[Request, Any, WebStore], Awaitable[Any]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                await guard_action(request)
                body = await json_body(request)
                return JSONResponse(await handler(request, body, await dash.store()))
            except _Refused as exc:
                return JSONResponse({"error": exc.message}, status_code=exc.status)
            except BadRequest as exc:
                return JSONResponse({"error": str(exc)}, status_code=exc.status)
            except (JobNotFound, ScheduleNotFound) as exc:
                return JSONResponse({"error": str(exc)}, status_code=404)
            except ValueError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            except (InvalidTransition, JobrunError) as exc:
                return JSONResponse({"error": str(exc)}, status_code=409)

        return endpoint

    # -- shared actions -------------------------------------------------------------------

    async def bulk(
        store: WebStore, request: Request, action: str, ids: list[UUID], flt: JobFilter | None
    ) -> dict[str, Any]:
        if flt is not None:
            ids = []
            cursor = None
            while len(ids) < BULK_FILTER_LIMIT:
                page = await store.list_jobs(flt, limit=500, cursor=cursor)
                ids.extend(job.id for job in page.jobs)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            ids = ids[:BULK_FILTER_LIMIT]
        done: list[str] = []
        skipped: dict[str, str] = {}
        actor = _actor(request)
        for job_id in ids:
            try:
                if action == "retry":
                    await store.retry(job_id, actor=actor)
                else:
                    await store.cancel(job_id, actor=actor)
                done.append(str(job_id))
            except (InvalidTransition, JobNotFound) as exc:
                skipped[str(job_id)] = str(exc)
        scope = "filter" if flt is not None else "selection"
        _audit(request, f"bulk {action} of a {scope}: {len(done)} done, {len(skipped)} skipped")
        return {"action": action, "done": done, "skipped": skipped}

    # -- pages ----------------------------------------------------------------------------

    async def overview(request: Request) -> Response:
        return dash.render(
            request, "overview.html", rows=await dash.overview_data(), spark=_sparkline
        )

    async def overview_fragment(request: Request) -> Response:
        return dash.render(
            request, "_overview_table.html", rows=await dash.overview_data(), spark=_sparkline
        )

    async def jobs(request: Request) -> Response:
        store = await dash.store()
        params = request.query_params
        try:
            flt = job_filter(params)
            cursor = UUID(params["cursor"]) if params.get("cursor") else None
        except ValueError as exc:
            return dash.render(request, "error.html", 400, message=str(exc))
        page = await store.list_jobs(flt, limit=50, cursor=cursor)
        query = {k: v for k, v in params.items() if k != "cursor" and v}
        return dash.render(
            request,
            "jobs.html",
            page=page,
            query=query,
            states=[s.value for s in JobState],
            flt=params,
        )

    async def job_detail(request: Request) -> Response:
        store = await dash.store()
        try:
            job = await store.get(UUID(request.path_params["job_id"]))
        except (JobNotFound, ValueError) as exc:
            return dash.render(request, "error.html", 404, message=str(exc))
        events = await store.events(job.id)
        return dash.render(request, "job.html", job=job, events=events)

    async def schedules(request: Request) -> Response:
        store = await dash.store()
        return dash.render(request, "schedules.html", schedules=await store.list_schedules())

    async def queues(request: Request) -> Response:
        store = await dash.store()
        return dash.render(request, "queues.html", queues=await store.list_queues())

    async def job_cancel_page(request: Request, form: Any, store: WebStore) -> str:
        job_id = UUID(request.path_params["job_id"])
        await store.cancel(job_id, actor=_actor(request))
        _audit(request, f"job {job_id} cancel")
        return f"/jobs/{job_id}"

    async def job_retry_page(request: Request, form: Any, store: WebStore) -> str:
        job_id = UUID(request.path_params["job_id"])
        await store.retry(job_id, actor=_actor(request))
        _audit(request, f"job {job_id} retry")
        return f"/jobs/{job_id}"

    async def jobs_bulk_page(request: Request, form: Any, store: WebStore) -> str:
        action, ids, flt = bulk_from_form(form)
        await bulk(store, request, action, ids, flt)
        query = urlencode(
            [
                (k, str(form.get(k)))
                for k in ("queue", "state", "type", "after", "before")
                if form.get(k)
            ]
        )
        return "/jobs" + (f"?{query}" if query else "")

    async def schedule_pause_page(request: Request, form: Any, store: WebStore) -> str:
        await pause_schedule(request, store)
        return "/schedules"

    async def schedule_resume_page(request: Request, form: Any, store: WebStore) -> str:
        await resume_schedule(request, store)
        return "/schedules"

    async def queue_pause_page(request: Request, form: Any, store: WebStore) -> str:
        await pause_queue(request, store)
        return "/queues"

    async def queue_resume_page(request: Request, form: Any, store: WebStore) -> str:
        await resume_queue(request, store)
        return "/queues"

    async def queue_limits_page(request: Request, form: Any, store: WebStore) -> str:
        fields = {k: v for k, v in form.items() if k != CSRF_FIELD}
        await set_limits(request, store, *limits(fields))
        return "/queues"

    async def queue_clear_page(request: Request, form: Any, store: WebStore) -> str:
        await clear_limits(request, store)
        return "/queues"

    # Queue and schedule controls have no job whose events could name the
    # actor: the row they change keeps it (changed_by, shown on their pages),
    # and each is logged once it succeeded (a refused one changed nothing).
    async def pause_schedule(request: Request, store: WebStore) -> Any:
        name = request.path_params["name"]
        schedule = await store.pause_schedule(name, actor=_actor(request))
        _audit(request, f"schedule {name!r} pause")
        return schedule

    async def resume_schedule(request: Request, store: WebStore) -> Any:
        name = request.path_params["name"]
        schedule = await store.resume_schedule(name, actor=_actor(request))
        _audit(request, f"schedule {name!r} resume")
        return schedule

    async def pause_queue(request: Request, store: WebStore) -> Any:
        name = request.path_params["name"]
        queue = await store.pause_queue(name, actor=_actor(request))
        _audit(request, f"queue {name!r} pause")
        return queue

    async def resume_queue(request: Request, store: WebStore) -> Any:
        name = request.path_params["name"]
        queue = await store.resume_queue(name, actor=_actor(request))
        _audit(request, f"queue {name!r} resume")
        return queue

    async def clear_limits(request: Request, store: WebStore) -> Any:
        name = request.path_params["name"]
        queue = await store.clear_queue_limits(name, actor=_actor(request))
        _audit(request, f"queue {name!r} clear limits")
        return queue

    async def set_limits(
        request: Request,
        store: WebStore,
        concurrency: int | None,
        rate: tuple[int, timedelta] | None,
    ) -> Any:
        name = request.path_params["name"]
        queue = await store.set_queue_limits(
            name, concurrency=concurrency, rate=rate, actor=_actor(request)
        )
        shown = f"rate {rate[0]}/{rate[1].total_seconds():g}s" if rate else "rate unchanged"
        _audit(request, f"queue {name!r} limits: concurrency {concurrency}, {shown}")
        return queue

    # -- live updates ---------------------------------------------------------------------

    async def overview_stream(request: Request) -> Response:
        async def events() -> AsyncIterator[str]:
            notifier = await dash.notifier()
            subscription = None
            watched: frozenset[str] = frozenset()
            last = None
            quiet_since = time.monotonic()
            try:
                while True:
                    rows = await dash.overview_data()
                    shown = json.dumps(rows, sort_keys=True)
                    if shown != last:
                        last = shown
                        quiet_since = time.monotonic()
                        yield "event: overview\ndata: changed\n\n"
                    elif time.monotonic() - quiet_since > 15:
                        quiet_since = time.monotonic()
                        yield ": keep-alive\n\n"
                    queues = frozenset(row["queue"] for row in rows)
                    if notifier is not None and queues and queues != watched:
                        if subscription is not None:
                            subscription.close()
                        subscription, watched = notifier.subscribe(queues), queues
                    if subscription is not None:
                        await subscription.wait(timedelta(seconds=dash.poll))
                    else:
                        await asyncio.sleep(dash.poll)
            finally:
                if subscription is not None:
                    subscription.close()

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    # -- JSON API -------------------------------------------------------------------------

    async def api_csrf(request: Request) -> Response:
        return JSONResponse({"token": request.scope.get("jobrun.csrf"), "header": "X-CSRF-Token"})

    async def api_overview(request: Request) -> Response:
        return JSONResponse({"queues": await dash.overview_data(), "read_only": dash.read_only})

    async def api_jobs(request: Request) -> Response:
        store = await dash.store()
        params = request.query_params
        try:
            flt = job_filter(params)
            cursor = UUID(params["cursor"]) if params.get("cursor") else None
            limit = min(max(int(params.get("limit", "50")), 1), 500)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(_jsonable(await store.list_jobs(flt, limit=limit, cursor=cursor)))

    async def api_job(request: Request) -> Response:
        store = await dash.store()
        try:
            job = await store.get(UUID(request.path_params["job_id"]))
        except (JobNotFound, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        events = await store.events(job.id)
        return JSONResponse({"job": _jsonable(job), "events": [_jsonable(e) for e in events]})

    async def api_job_cancel(request: Request, body: Any, store: WebStore) -> Any:
        no_fields(body)
        job: Job = await store.cancel(UUID(request.path_params["job_id"]), actor=_actor(request))
        _audit(request, f"job {job.id} cancel")
        return _jsonable(job)

    async def api_job_retry(request: Request, body: Any, store: WebStore) -> Any:
        no_fields(body)
        job: Job = await store.retry(UUID(request.path_params["job_id"]), actor=_actor(request))
        _audit(request, f"job {job.id} retry")
        return _jsonable(job)

    async def api_jobs_bulk(request: Request, body: Any, store: WebStore) -> Any:
        action, ids, flt = bulk_from_body(body)
        return await bulk(store, request, action, ids, flt)

    async def api_schedules(request: Request) -> Response:
        store = await dash.store()
        return JSONResponse([_jsonable(s) for s in await store.list_schedules()])

    async def api_schedule_pause(request: Request, body: Any, store: WebStore) -> Any:
        no_fields(body)
        return _jsonable(await pause_schedule(request, store))

    async def api_schedule_resume(request: Request, body: Any, store: WebStore) -> Any:
        no_fields(body)
        return _jsonable(await resume_schedule(request, store))

    async def api_queues(request: Request) -> Response:
        store = await dash.store()
        return JSONResponse([_jsonable(q) for q in await store.list_queues()])

    async def api_queue_pause(request: Request, body: Any, store: WebStore) -> Any:
        no_fields(body)
        return _jsonable(await pause_queue(request, store))

    async def api_queue_resume(request: Request, body: Any, store: WebStore) -> Any:
        no_fields(body)
        return _jsonable(await resume_queue(request, store))

    async def api_queue_limits(request: Request, body: Any, store: WebStore) -> Any:
        return _jsonable(await set_limits(request, store, *limits(body)))

    async def api_queue_clear(request: Request, body: Any, store: WebStore) -> Any:
        no_fields(body)
        return _jsonable(await clear_limits(request, store))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await dash.close()

    # {name:path}: a queue or schedule name may hold "/" (billing/eu); the
    # pages send it percent-encoded and the server hands the route the
    # decoded path, so only a converter that matches "/" gets the whole name.
    # The action is always the last segment, so the match is unambiguous.
    routes = [
        Route("/", overview),
        Route("/fragments/overview", overview_fragment),
        Route("/sse/overview", overview_stream),
        Route("/jobs", jobs),
        Route("/jobs/bulk", page_action(jobs_bulk_page), methods=["POST"]),
        Route("/jobs/{job_id}", job_detail),
        Route("/jobs/{job_id}/cancel", page_action(job_cancel_page), methods=["POST"]),
        Route("/jobs/{job_id}/retry", page_action(job_retry_page), methods=["POST"]),
        Route("/schedules", schedules),
        Route("/schedules/{name:path}/pause", page_action(schedule_pause_page), methods=["POST"]),
        Route("/schedules/{name:path}/resume", page_action(schedule_resume_page), methods=["POST"]),
        Route("/queues", queues),
        Route("/queues/{name:path}/pause", page_action(queue_pause_page), methods=["POST"]),
        Route("/queues/{name:path}/resume", page_action(queue_resume_page), methods=["POST"]),
        Route("/queues/{name:path}/limits", page_action(queue_limits_page), methods=["POST"]),
        Route("/queues/{name:path}/clear-limits", page_action(queue_clear_page), methods=["POST"]),
        Route("/api/csrf", api_csrf),
        Route("/api/overview", api_overview),
        Route("/api/jobs", api_jobs),
        Route("/api/jobs/bulk", api_action(api_jobs_bulk), methods=["POST"]),
        Route("/api/jobs/{job_id}", api_job),
        Route("/api/jobs/{job_id}/cancel", api_action(api_job_cancel), methods=["POST"]),
        Route("/api/jobs/{job_id}/retry", api_action(api_job_retry), methods=["POST"]),
        Route("/api/schedules", api_schedules),
        Route("/api/schedules/{name:path}/pause", api_action(api_schedule_pause), methods=["POST"]),
        Route(
            "/api/schedules/{name:path}/resume", api_action(api_schedule_resume), methods=["POST"]
        ),
        Route("/api/queues", api_queues),
        Route("/api/queues/{name:path}/pause", api_action(api_queue_pause), methods=["POST"]),
        Route("/api/queues/{name:path}/resume", api_action(api_queue_resume), methods=["POST"]),
        Route("/api/queues/{name:path}/limits", api_action(api_queue_limits), methods=["POST"]),
        Route(
            "/api/queues/{name:path}/clear-limits", api_action(api_queue_clear), methods=["POST"]
        ),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(_Guard, auth=auth)
    app.state.dashboard = dash
    return app
