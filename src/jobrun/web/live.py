"""Live updates of the overview: a server-sent event stream that says when to look again.

A producer's NOTIFY (through :class:`~jobrun.postgres.Notifier`) wakes the
stream at once; because completions send no notification, the stream also
re-reads the queues every ``poll`` seconds, and only sends an event when
what the overview shows changed (with a comment now and then to keep
proxies from closing a quiet connection). The page then fetches its table
again (``/fragments/overview``), so the stream carries no data of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import timedelta

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from jobrun.web.dashboard import Dashboard

__all__ = ["KEEP_ALIVE_SECONDS", "overview_stream"]

KEEP_ALIVE_SECONDS = 15
"""A quiet stream sends a comment after this long, so that no proxy takes it for dead."""


async def overview_stream(dash: Dashboard, request: Request) -> Response:
    """The overview's event stream (``text/event-stream``): ``overview`` when it changed."""
    return StreamingResponse(
        _events(dash),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _events(dash: Dashboard) -> AsyncIterator[str]:
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
            elif time.monotonic() - quiet_since > KEEP_ALIVE_SECONDS:
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
