"""Ingest over HTTP: authentication, replay, conflict and bad input, on PostgreSQL.

Each refusal is checked to have written nothing (no event, no job).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from detector.domain import MAX_BODY_BYTES
from detector.http import create_app, serve_loopback, sign_body
from detector.postgres import PgDetector
from detector.signing import Signer, generate_seed

T0 = 1_700_000_000_000
KEYS = {"n1": b"key-one", "n2": b"key-two"}


@pytest.fixture
async def app(detector_db: str) -> AsyncIterator[tuple[httpx.AsyncClient, PgDetector]]:
    async with PgDetector(detector_db, signer=Signer(generate_seed()), clock=lambda: T0) as store:
        transport = httpx.ASGITransport(app=create_app(store, KEYS, lambda: T0))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client, store


def event(**changes: Any) -> dict[str, Any]:
    data = {"request_id": "r1", "site": "s1", "address": "10.0.0.1", "rule_version": "v1"}
    return {**data, "occurred_ms": T0, **changes}


async def post(
    client: httpx.AsyncClient, body: bytes, node: str = "n1", key: bytes | None = None
) -> httpx.Response:
    signature = sign_body(key if key is not None else KEYS.get(node, b"x"), body)
    headers = {"x-node-id": node, "x-signature": signature}
    return await client.post("/events", content=body, headers=headers)


async def nothing_written(store: PgDetector, events: int = 0) -> None:
    state = await store.state()
    assert len(state["events"]) == events
    assert await store.pending_jobs() == events


async def test_a_signed_event_is_stored_and_an_identical_replay_returns_it(app: Any) -> None:
    client, store = app
    body = json.dumps(event()).encode()
    first = await post(client, body)
    assert first.status_code == 202
    again = await post(client, body)
    assert again.status_code == 200
    assert again.json() == {**first.json(), "replay": True}
    await nothing_written(store, events=1)  # one event, one job


async def test_same_request_id_with_other_content_is_409(app: Any) -> None:
    client, store = app
    assert (await post(client, json.dumps(event()).encode())).status_code == 202
    response = await post(client, json.dumps(event(address="10.0.0.2")).encode())
    assert response.status_code == 409
    assert "already ingested" in response.json()["error"]
    await nothing_written(store, events=1)


@pytest.mark.parametrize(
    ("node", "key", "status"),
    [("nobody", b"key-one", 401), ("n1", b"wrong-key", 401), ("n2", b"key-one", 401)],
)
async def test_unknown_node_or_bad_signature_is_401(
    app: Any, node: str, key: bytes, status: int
) -> None:
    client, store = app
    response = await post(client, json.dumps(event()).encode(), node=node, key=key)
    assert response.status_code == status
    await nothing_written(store)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{not json", 400, "malformed JSON"),
        (json.dumps({"site": "s1"}).encode(), 422, "request_id: Field required"),
        (json.dumps(event(extra=1)).encode(), 422, "extra: Extra inputs"),
        (json.dumps(event(rule_version="v9")).encode(), 422, "unknown rule version 'v9'"),
        (json.dumps(event(occurred_ms=T0 - 3_600_000)).encode(), 422, "freshness limit"),
        (json.dumps(event(occurred_ms=T0 + 3_600_000)).encode(), 422, "in the future"),
        (b" " * (MAX_BODY_BYTES + 1), 413, "larger than"),
    ],
)
async def test_bad_input_is_a_clear_4xx_and_writes_nothing(
    app: Any, body: bytes, status: int, message: str
) -> None:
    client, store = app
    response = await post(client, body)
    assert response.status_code == status
    assert message in response.json()["error"]
    await nothing_written(store)


async def test_a_signed_event_over_a_real_socket_is_stored_with_its_job(detector_db: str) -> None:
    async with (
        PgDetector(detector_db, signer=Signer(generate_seed()), clock=lambda: T0) as store,
        serve_loopback(create_app(store, KEYS, lambda: T0)) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        assert base.startswith("http://127.0.0.1:")
        body = json.dumps(event()).encode()
        created = await post(client, body)
        assert created.status_code == 202, created.text
        replay = await post(client, body)
        assert replay.status_code == 200 and replay.json() == {**created.json(), "replay": True}
        forged = await post(client, body, key=b"wrong")
        assert forged.status_code == 401
        await nothing_written(store, events=1)


async def test_hostile_signature_and_nesting_are_4xx_over_a_real_socket(
    detector_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 27, item 17: both were answered 500 with a traceback in the server's log.
    deep = b"[" * 8000 + b"]" * 8000
    assert len(deep) <= MAX_BODY_BYTES
    async with (
        PgDetector(detector_db, signer=Signer(generate_seed()), clock=lambda: T0) as store,
        serve_loopback(create_app(store, KEYS, lambda: T0)) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        body = json.dumps(event()).encode()
        for signature in ("é" + sign_body(KEYS["n1"], body)[1:], "\u00ff" * 64):
            headers = {"x-node-id": "n1", "x-signature": signature.encode("latin-1")}
            response = await client.post("/events", content=body, headers=headers)
            assert response.status_code == 401, response.text
            assert response.json()["error"] == "unknown node or bad signature"
        nested = await post(client, deep)
        assert nested.status_code == 400, nested.text
        assert "nested" in nested.json()["error"]
        await nothing_written(store)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
