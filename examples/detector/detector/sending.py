"""Posting a signed snapshot to an agent over HTTP.

The body is the stored bytes, unchanged; the revision and the signature travel
in headers so the agent can verify the bytes it received. The endpoint
``null:`` accepts without any network (the race test's agents, which only
count revisions).
"""

from __future__ import annotations

import base64

import httpx

from detector.port import Snapshot

__all__ = ["NULL_ENDPOINT", "post_snapshot"]

NULL_ENDPOINT = "null:"
"""An agent endpoint that accepts every snapshot without a request."""


async def post_snapshot(endpoint: str, snapshot: Snapshot, *, seconds: float = 5.0) -> int:
    """POST ``snapshot`` to ``endpoint``; return the HTTP status (transport errors raise)."""
    if endpoint == NULL_ENDPOINT:
        return 200
    assert snapshot.signature is not None
    headers = {
        "content-type": "application/json",
        "x-agent": snapshot.agent_id,
        "x-revision": str(snapshot.revision),
        "x-signature": base64.b64encode(snapshot.signature).decode(),
    }
    async with httpx.AsyncClient(timeout=seconds) as client:
        response = await client.post(endpoint, content=snapshot.body, headers=headers)
    return response.status_code
