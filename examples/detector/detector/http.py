"""Ingest over HTTP: ``POST /events`` from authenticated nodes (Starlette, served on loopback).

Each node signs the exact request body with HMAC-SHA256 under its own key and
sends ``X-Node-Id`` and ``X-Signature`` (hex). The node id the detector stores
is the authenticated one, never a field of the body. Every refusal happens
before any write and names its reason:

- 401 unknown node or bad signature; 413 body over
  :data:`~detector.domain.MAX_BODY_BYTES`; 400 malformed JSON (nesting too
  deep for the parser included); 422 missing or
  invalid fields, an unknown rule version, or a time beyond the freshness
  limit; 409 a known (node, request id) with a different digest.
- 202 a new event (stored with its detection job); 200 an identical replay,
  answered with the stored result and no second job.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from detector.domain import MAX_BODY_BYTES, DigestConflict, EventIn, UnknownRule
from detector.port import DetectorStore
from detector.service import accept

__all__ = ["create_app", "serve_loopback", "sign_body"]


def sign_body(key: bytes, body: bytes) -> str:
    """The ``X-Signature`` of ``body`` under a node's key (hex HMAC-SHA256)."""
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(
    store: DetectorStore, node_keys: Mapping[str, bytes], clock: Callable[[], int]
) -> Starlette:
    """The ingest application over ``store``, accepting the nodes of ``node_keys``."""

    async def events(request: Request) -> JSONResponse:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return _error(413, f"body larger than {MAX_BODY_BYTES} bytes")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return _error(413, f"body larger than {MAX_BODY_BYTES} bytes")
        node_id = request.headers.get("x-node-id", "")
        key = node_keys.get(node_id)
        # Compared as bytes: headers arrive decoded as Latin-1, and compare_digest
        # refuses str holding anything but ASCII (a TypeError, not a mismatch).
        signature = request.headers.get("x-signature", "").encode("latin-1", "replace")
        if key is None or not hmac.compare_digest(sign_body(key, body).encode(), signature):
            return _error(401, "unknown node or bad signature")
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return _error(400, "malformed JSON")
        except RecursionError:
            # A small body can nest deeper than the parser's recursion limit.
            return _error(400, "malformed JSON: nested too deeply")
        try:
            event = EventIn.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            return _error(422, problems)
        try:
            result = await accept(store, node_id, event, now_ms=clock())
        except DigestConflict as exc:
            return _error(409, str(exc))
        except (UnknownRule, ValueError) as exc:
            return _error(422, str(exc))
        answer = {"event_id": result.event_id, "digest": result.digest, "replay": result.replay}
        return JSONResponse(answer, status_code=200 if result.replay else 202)

    return Starlette(routes=[Route("/events", events, methods=["POST"])])


@contextlib.asynccontextmanager
async def serve_loopback(app: Any) -> AsyncIterator[str]:
    """Serve the ASGI ``app`` with uvicorn on a free 127.0.0.1 port; yield its base URL.

    The socket is bound before uvicorn starts, so the port is known and never
    raced for; leaving the block shuts the server down.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)
        sock.close()
