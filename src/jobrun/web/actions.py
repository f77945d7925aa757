"""The dashboard's actions on the store: one function each, behind both a page form and the API.

A page's POST and the same path under ``/api`` run the same action function,
read their input with the same readers (:mod:`jobrun.web.bodies`), and are
refused for the same reasons with the same status (:func:`refusal_status`):
the action decides, and the page (a redirect or an error page) and the API
(a JSON body) only shape the answer.

The actions of the Schedules page that take a schedule's fields, and the
Queues page's drain and clear, live in :mod:`jobrun.web.schedule_actions` and
:mod:`jobrun.web.queue_actions`; :data:`ACTIONS` lists them all.

Every action names its actor (``<user> via web``): a job action in the job's
events; a queue or schedule action, which has no job to attach an event to,
in the changed row's ``changed_by`` (its last change only) and in an INFO
line of the ``jobrun.web`` logger (``jobrun web`` logs to stderr), which
keeps them all. A line is logged only once the action succeeded: a refused
one changed nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlencode
from uuid import UUID

from jobrun.domain import Job, JobFilter, QueueControls
from jobrun.errors import (
    ConfirmationNeeded,
    InvalidTransition,
    JobNotFound,
    JobrunError,
    ScheduleNotFound,
)
from jobrun.ports import Admin
from jobrun.web import queue_actions, schedule_actions
from jobrun.web.bodies import (
    FILTER_FIELDS,
    SEARCH_FIELDS,
    BadRequest,
    bulk_from_body,
    bulk_from_form,
    confirmed_count,
    limits,
    no_fields,
)

__all__ = [
    "ACTIONS",
    "BULK_FILTER_LIMIT",
    "REFUSALS",
    "Action",
    "bulk",
    "cancel_job",
    "clear_queue_limits",
    "pause_queue",
    "pause_schedule",
    "refusal_status",
    "resume_queue",
    "resume_schedule",
    "retry_job",
    "run_job_now",
    "set_queue_limits",
]

BULK_FILTER_LIMIT = 10_000
"""A bulk action over a whole filter touches at most this many jobs per request."""
REFUSALS = (JobrunError, ValueError)
"""What an action raises when it is refused; anything else is a failure (a 500)."""
_log = logging.getLogger("jobrun.web")


def refusal_status(exc: Exception) -> int:
    """The HTTP status answering a refusal (one of :data:`REFUSALS`), for pages and API alike.

    A refused request keeps its own status (403, 413, 415, 400), a missing
    job or schedule is 404, bad input 400 (jobrun's own input errors are
    ``ValueError`` too), and any other refusal by the store, such as a job in
    a state the action does not apply to, is a conflict (409).
    """
    if isinstance(exc, BadRequest):
        return exc.status
    if isinstance(exc, JobNotFound | ScheduleNotFound):
        return 404
    if isinstance(exc, ValueError):
        return 400
    return 409


def _audit(action: str, actor: str) -> None:
    _log.info("%s by %s", action, actor)


async def cancel_job(store: Admin, *, job_id: str, actor: str) -> Job:
    """Cancel the job ``job_id`` (a queued one at once, a running one at its next heartbeat)."""
    job = await store.cancel(UUID(job_id), actor=actor)
    _audit(f"job {job.id} cancel", actor)
    return job


async def retry_job(store: Admin, *, job_id: str, actor: str) -> Job:
    """Queue the finished job ``job_id`` to run again."""
    job = await store.retry(UUID(job_id), actor=actor)
    _audit(f"job {job.id} retry", actor)
    return job


async def run_job_now(store: Admin, *, job_id: str, actor: str) -> Job:
    """Make the queued job ``job_id`` due now (delayed, or waiting for a retry)."""
    job = await store.run_now(UUID(job_id), actor=actor)
    _audit(f"job {job.id} run now", actor)
    return job


async def bulk(
    store: Admin,
    *,
    action: str,
    ids: list[UUID],
    flt: JobFilter | None,
    actor: str,
    confirm: int | None = None,
) -> dict[str, Any]:
    """Retry, cancel or delete the jobs ``ids``, or those ``flt`` finds (at most
    :data:`BULK_FILTER_LIMIT`).

    A job the action does not apply to (or that is gone) is skipped with its
    reason; the answer lists what was done and what was skipped. A delete
    goes ahead only when ``confirm`` is the number of jobs it would delete
    (:class:`ConfirmationNeeded` otherwise): running jobs are skipped, the
    rest go with their events and results.
    """
    if flt is not None:
        ids = await _matching(store, flt)
    if action == "delete":
        return await _delete(store, ids, flt is not None, actor, confirm)
    done: list[str] = []
    skipped: dict[str, str] = {}
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
    _audit(f"bulk {action} of a {scope}: {len(done)} done, {len(skipped)} skipped", actor)
    return {"action": action, "done": done, "skipped": skipped}


async def _delete(
    store: Admin, ids: list[UUID], by_filter: bool, actor: str, confirm: int | None
) -> dict[str, Any]:
    if confirm != len(ids):
        raise ConfirmationNeeded(len(ids))
    deleted: set[UUID] = set()
    for start in range(0, len(ids), 500):
        deleted.update(await store.delete_jobs(ids[start : start + 500]))
    done = [str(i) for i in ids if i in deleted]
    skipped = {str(i): "running (cancel it first) or gone" for i in ids if i not in deleted}
    scope = "filter" if by_filter else "selection"
    _audit(f"bulk delete of a {scope}: {len(done)} deleted, {len(skipped)} skipped", actor)
    return {"action": "delete", "done": done, "skipped": skipped}


async def _matching(store: Admin, flt: JobFilter) -> list[UUID]:
    ids: list[UUID] = []
    cursor = None
    while len(ids) < BULK_FILTER_LIMIT:
        page = await store.list_jobs(flt, limit=500, cursor=cursor)
        ids.extend(job.id for job in page.jobs)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return ids[:BULK_FILTER_LIMIT]


def _control(method: str, kind: str, verb: str, doc: str) -> Callable[..., Awaitable[Any]]:
    """An action that changes one queue's or schedule's controls by name: the store's ``method``."""

    async def control(store: Any, *, name: str, actor: str) -> Any:
        changed = await getattr(store, method)(name, actor=actor)
        _audit(f"{kind} {name!r} {verb}", actor)
        return changed

    control.__name__ = control.__qualname__ = method
    control.__doc__ = doc
    return control


pause_schedule = _control(
    "pause_schedule", "schedule", "pause", "Stop the schedule ``name`` from firing."
)
resume_schedule = _control(
    "resume_schedule",
    "schedule",
    "resume",
    "Let the schedule ``name`` fire again (the runs it missed are skipped).",
)
pause_queue = _control(
    "pause_queue", "queue", "pause", "Stop workers claiming from queue ``name``."
)
resume_queue = _control(
    "resume_queue", "queue", "resume", "Let workers claim from queue ``name`` again."
)
clear_queue_limits = _control(
    "clear_queue_limits", "queue", "clear limits", "Remove every limit of queue ``name``."
)


async def set_queue_limits(
    store: Admin,
    *,
    name: str,
    concurrency: int | None,
    rate: tuple[int, timedelta] | None,
    actor: str,
    per_key: int | None = None,
) -> QueueControls:
    """Set queue ``name``'s concurrency limit, its rate (claims per interval), its
    limit per concurrency key, or several."""
    queue = await store.set_queue_limits(
        name, concurrency=concurrency, rate=rate, key_limit=per_key, actor=actor
    )
    shown = f"rate {rate[0]}/{rate[1].total_seconds():g}s" if rate else "rate unchanged"
    if per_key is not None:
        shown += f", {per_key} per key"
    _audit(f"queue {name!r} limits: concurrency {concurrency}, {shown}", actor)
    return queue


# -- how the routes ask for them ---------------------------------------------------------

Reader = Callable[[Mapping[str, Any]], dict[str, Any]]


def _takes_nothing(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {}


def _refuses_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    no_fields(body)
    return {}


def _limits(fields: Mapping[str, Any]) -> dict[str, Any]:
    concurrency, rate, per_key = limits(fields)
    return {"concurrency": concurrency, "rate": rate, "per_key": per_key}


def _bulk_form(form: Mapping[str, Any]) -> dict[str, Any]:
    action, ids, flt = bulk_from_form(form)
    return {"action": action, "ids": ids, "flt": flt, "confirm": confirmed_count(form)}


def _bulk_body(body: Mapping[str, Any]) -> dict[str, Any]:
    action, ids, flt = bulk_from_body(body)
    return {"action": action, "ids": ids, "flt": flt, "confirm": confirmed_count(body)}


def _job_page(done: Job, form: Mapping[str, Any]) -> str:
    return f"/jobs/{done.id}"


def _jobs_listing(done: Any, form: Mapping[str, Any]) -> str:
    """The jobs listing under the filter and search the bulk form was sent from."""
    fields = (*FILTER_FIELDS, *SEARCH_FIELDS)
    query = urlencode([(k, str(form.get(k))) for k in fields if form.get(k)])
    return "/jobs" + (f"?{query}" if query else "")


def _page(path: str) -> Callable[[Any, Mapping[str, Any]], str]:
    return lambda done, form: path


def _bulk_again(params: Mapping[str, Any]) -> str:
    return "/jobs/bulk"


def _at(kind: str, verb: str) -> Callable[[Mapping[str, Any]], str]:
    """The path of action ``verb`` on the queue or schedule its path parameters name."""
    return lambda params: f"/{kind}/{quote(str(params['name']), safe='')}/{verb}"


@dataclass(frozen=True)
class Action:
    """One action as both of its routes ask for it: a page form POST and the API's JSON POST.

    ``run`` is called with the store, the route's path parameters, what the
    reader found, and ``actor`` as keywords. ``form`` reads the page's form
    (the CSRF field removed) and ``body`` the API's JSON object; ``back``
    is where the page returns once the action is done, and ``again`` (from
    the path parameters) where a page asking for a confirmation posts it.
    """

    run: Callable[..., Awaitable[Any]]
    back: Callable[[Any, Mapping[str, Any]], str]
    form: Reader = _takes_nothing
    body: Reader = _refuses_fields
    again: Callable[[Mapping[str, Any]], str] = _bulk_again


ACTIONS = {
    "bulk": Action(bulk, _jobs_listing, form=_bulk_form, body=_bulk_body),
    "cancel_job": Action(cancel_job, _job_page),
    "retry_job": Action(retry_job, _job_page),
    "run_job_now": Action(run_job_now, _job_page),
    "pause_schedule": Action(pause_schedule, _page("/schedules")),
    "resume_schedule": Action(resume_schedule, _page("/schedules")),
    "pause_queue": Action(pause_queue, _page("/queues")),
    "resume_queue": Action(resume_queue, _page("/queues")),
    "set_queue_limits": Action(set_queue_limits, _page("/queues"), form=_limits, body=_limits),
    "clear_queue_limits": Action(clear_queue_limits, _page("/queues")),
    "create_schedule": Action(
        schedule_actions.create_schedule,
        _page("/schedules"),
        form=schedule_actions.new_schedule_fields,
        body=schedule_actions.new_schedule_body,
    ),
    "edit_schedule": Action(
        schedule_actions.edit_schedule,
        _page("/schedules"),
        form=schedule_actions.patch_fields,
        body=schedule_actions.patch_body,
    ),
    "run_schedule_now": Action(schedule_actions.run_schedule_now, _page("/schedules")),
    "delete_schedule": Action(
        schedule_actions.delete_schedule,
        _page("/schedules"),
        form=schedule_actions.delete_body,
        body=schedule_actions.delete_body,
        again=_at("schedules", "delete"),
    ),
    "drain_queue": Action(queue_actions.drain_queue, _page("/queues")),
    "clear_queue": Action(
        queue_actions.clear_queue,
        _page("/queues"),
        form=queue_actions.clear_body,
        body=queue_actions.clear_body,
        again=_at("queues", "clear"),
    ),
}
"""Every action the dashboard offers, by name."""
