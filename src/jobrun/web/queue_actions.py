"""The Queues page's drain and clear, and their readers.

*Drain* is a pause seen through to its end: workers stop claiming the
queue's jobs, the ones running finish, and the page says ``draining: N
running`` until none runs, then ``drained`` (:func:`drain_state`). *Clear*
deletes the queue's jobs that are not running (queued, due or not, and
waiting) once ``confirm`` is their number, as the jobs page's bulk delete asks
(:class:`~jobrun.errors.ConfirmationNeeded`). Both name their actor in an INFO
line of the ``jobrun.web`` logger; a drain also stores it as the queue's
``changed_by``, as a pause does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from jobrun._endings import plural
from jobrun.domain import QueueInfo
from jobrun.errors import ConfirmationNeeded
from jobrun.ports import Admin
from jobrun.web.bodies import BadRequest, Unconfirmed, confirmed_count

__all__ = ["clear_body", "clear_queue", "drain_queue", "drain_state"]

_log = logging.getLogger("jobrun.web")


def drain_state(queue: QueueInfo) -> str:
    """Where a paused queue's drain stands: ``draining: N running``, or ``drained``."""
    return f"draining: {queue.leased} running" if queue.leased else "drained"


async def drain_queue(store: Admin, *, name: str, actor: str) -> dict[str, Any]:
    """Pause queue ``name`` and answer with it and where its drain stands."""
    paused = await store.pause_queue(name, actor=actor)
    listed = {q.name: q for q in await store.list_queues()}
    queue = listed.get(name) or QueueInfo(**paused.model_dump())
    _log.info("queue %r drain (%s) by %s", name, drain_state(queue), actor)
    return {**queue.model_dump(mode="json"), "drain": drain_state(queue)}


async def clear_queue(
    store: Admin, *, name: str, confirm: int | None, actor: str
) -> dict[str, Any]:
    """Delete queue ``name``'s jobs that are not running, once ``confirm`` is their number.

    Otherwise nothing is deleted and :class:`~jobrun.web.bodies.Unconfirmed`
    carries the number to confirm.
    """
    try:
        deleted = await store.clear_queue(name, confirm=confirm, actor=actor)
    except ConfirmationNeeded as exc:
        one = exc.count == 1
        jobs = plural(exc.count, "job")
        idle = f"{jobs} that {'is' if one else 'are'} not running"
        raise Unconfirmed(
            f"clearing queue {name!r} deletes {idle}, with {'its' if one else 'their'} events,"
            f" and cannot be undone: send confirm={exc.count} to go ahead",
            confirm=exc.count,
            title=f"Clear queue {name}: delete {jobs}?",
            detail=(
                f"This deletes the queue's {idle} (queued, scheduled for later, or waiting)"
                f" with {'its' if one else 'their'} events. It cannot be undone. Running jobs"
                " are left to finish; jobs enqueued from now on are kept."
            ),
        ) from None
    _log.info("queue %r clear: %d jobs deleted by %s", name, deleted, actor)
    return {"queue": name, "deleted": deleted}


def clear_body(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A clear's form or body: only ``confirm``, the number of jobs it deletes."""
    for key in fields:
        if key != "confirm":
            raise BadRequest(f"unexpected field {key!r}: it takes confirm")
    return {"confirm": confirmed_count(fields)}
