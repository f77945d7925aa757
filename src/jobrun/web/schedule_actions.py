"""The Schedules page's actions: create, edit, run now and delete a schedule, and their readers.

A schedule's fields are read by :mod:`jobrun.schedule_input`, the reader
``jobrun schedules add|edit`` uses, so the dashboard and the CLI take and
refuse the same schedules with the same reasons (a form sends texts, as the
command line does; the API's JSON values are read as those texts would be).

Each action names its actor (``<user> via web``) in an INFO line of the
``jobrun.web`` logger once it succeeded; an edit also stores it as the
schedule's ``changed_by``, and a run now in its job's enqueued event.
A delete asks first (:class:`~jobrun.web.bodies.Unconfirmed`): ``confirm``
must repeat the schedule's name.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from jobrun.domain import Job, NewSchedule, Schedule, SchedulePatch
from jobrun.ports import ScheduleStore
from jobrun.schedule_input import SCHEDULE_FIELDS, new_schedule, schedule_patch
from jobrun.web.bodies import BadRequest, Unconfirmed

__all__ = [
    "create_schedule",
    "delete_body",
    "delete_schedule",
    "edit_schedule",
    "new_schedule_body",
    "new_schedule_fields",
    "patch_body",
    "patch_fields",
    "run_schedule_now",
]

_log = logging.getLogger("jobrun.web")


async def create_schedule(store: ScheduleStore, *, schedule: NewSchedule, actor: str) -> Schedule:
    """Store the new ``schedule``; its first run is the first after database now."""
    created = await store.create_schedule(schedule)
    _log.info("schedule %r created by %s", created.name, actor)
    return created


async def edit_schedule(
    store: ScheduleStore, *, name: str, patch: SchedulePatch, actor: str
) -> Schedule:
    """Change schedule ``name`` as ``patch`` says; a new trigger recomputes its next run.

    A schedule declared in code is refused (409): its declaration is where it
    changes, and the next deploy would write it over an edit.
    """
    changed = await store.update_schedule(name, patch, actor=actor)
    _log.info("schedule %r edit of %s by %s", name, ", ".join(_changed(patch)), actor)
    return changed


async def run_schedule_now(store: ScheduleStore, *, name: str, actor: str) -> Job:
    """Enqueue one job of schedule ``name`` now; its regular next run stays as it was."""
    job = await store.run_schedule_now(name, actor=actor)
    _log.info("schedule %r run now by %s: job %s", name, actor, job.id)
    return job


async def delete_schedule(
    store: ScheduleStore, *, name: str, confirm: str | None, actor: str
) -> dict[str, Any]:
    """Delete schedule ``name`` once ``confirm`` repeats its name; the jobs it made stay.

    Without it nothing is deleted: :class:`~jobrun.web.bodies.Unconfirmed`
    says what deleting it means (404 first for a schedule that is not there).
    """
    schedule = await store.get_schedule(name)
    if confirm != name:
        detail = "The jobs it already enqueued are kept. It cannot be undone."
        if schedule.origin == "code":
            detail += (
                f" It is declared in code (group {schedule.declared_group!r}): a deploy that"
                " declares it creates it again; remove it from the code to remove it for good."
            )
        raise Unconfirmed(
            f"deleting schedule {name!r} cannot be undone: send confirm={name!r} to go ahead",
            confirm=name,
            title=f"Delete schedule {name}?",
            detail=detail,
        )
    await store.delete_schedule(name)
    _log.info("schedule %r deleted by %s", name, actor)
    return {"deleted": name}


def _changed(patch: SchedulePatch) -> list[str]:
    return [field for field in SCHEDULE_FIELDS if getattr(patch, field) is not None]


# -- readers: a page's form fields, or the API's JSON object -----------------------------


def _texts(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The API's values as the form would send them: a payload as its JSON text."""
    values = dict(fields)
    if "payload" in values:
        values["payload"] = json.dumps(values["payload"], ensure_ascii=False)
    return values


def new_schedule_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The create form's (or body's) schedule: ``name`` and the schedule fields."""
    return {"schedule": new_schedule(dict(fields))}


def new_schedule_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The API's create body: as the form, with ``payload`` any JSON value."""
    return new_schedule_fields(_texts(body))


def patch_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The edit form's change: the fields given, blank ones left as they are."""
    return {"patch": schedule_patch(dict(fields))}


def patch_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The API's edit body: as the form, with ``payload`` any JSON value."""
    return patch_fields(_texts(body))


def delete_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The delete form's or body's only field, ``confirm``: the schedule's name."""
    for key in body:
        if key != "confirm":
            raise BadRequest(f"unexpected field {key!r}: it takes confirm")
    confirm = body.get("confirm")
    if confirm is not None and not isinstance(confirm, str):
        raise BadRequest("confirm must be the schedule's name (a string)")
    return {"confirm": confirm}
