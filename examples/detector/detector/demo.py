"""``python -m detector demo`` (``scripts/detector-demo``): the whole pipeline over real sockets.

What it runs, on a fresh database of the embedded server (or, with
``--database-url``, on that database, which must hold no detector events):

1. jobrun's and the detector's migrations;
2. simulated agents: small HTTP servers on loopback that receive snapshots,
   verify each Ed25519 signature with the detector's public key, and check
   that every agent's revisions arrive in increasing order (a resend of the
   revision it already holds, byte for byte, is accepted as a redelivery);
3. the ingest application (Starlette) served by uvicorn on a free loopback port;
4. ``--workers`` detector workers in this process, each through its own jobrun
   :class:`~jobrun.Client` (its own pool, LISTEN connection and lease owner);
5. simulated nodes that POST HMAC-signed events at the same time: one burst
   per node that crosses a threshold, background traffic that never does, a
   hot address every node hits (one shared key, counted exactly under the key
   lock), identical replays of events already sent, and a few requests with a
   bad signature;
6. it waits until no detector job is left, runs the durable scan once, and
   prints a summary table. Every check must hold (:func:`run_demo` returns
   False, and the command exits 1, when one does not).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from detector.domain import RULES, EventIn, shared_key
from detector.http import create_app, serve_loopback, sign_body
from detector.postgres import PgDetector, now_ms
from detector.signing import Signer, generate_seed, verify

__all__ = ["AgentServer", "Check", "run_demo"]

_DEADLINE = 50.0
_HOT_ADDRESS = "192.0.2.1"


@dataclass
class AgentServer:
    """One simulated agent: verifies each snapshot and its revision order."""

    agent_id: str
    public_key: bytes
    latest: int = 0
    """The newest revision it accepted."""
    accepted: int = 0
    """Snapshots accepted with a new, higher revision."""
    resends: int = 0
    """Identical resends of the revision it already holds (a redelivery)."""
    signature_failures: int = 0
    """Snapshots whose signature did not verify (or was missing)."""
    order_violations: int = 0
    """Revisions older than the one it holds, reused with other bytes, or mislabelled."""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    """The decisions of the newest snapshot it accepted."""
    _body: bytes = b""

    async def receive(self, request: Request) -> Response:
        """``POST /snapshots``: verify, check the revision, remember the decisions."""
        body = await request.body()
        try:
            signature = base64.b64decode(request.headers["x-signature"], validate=True)
            revision = int(request.headers["x-revision"])
        except (KeyError, ValueError):
            self.signature_failures += 1
            return Response("missing or malformed signature headers", status_code=400)
        if not verify(self.public_key, body, signature):
            self.signature_failures += 1
            return Response("bad signature", status_code=400)
        data = json.loads(body)
        if data["agent_id"] != self.agent_id or data["revision"] != revision:
            self.order_violations += 1
            return Response("snapshot labelled for another agent or revision", status_code=409)
        if revision > self.latest:
            self.latest, self._body, self.decisions = revision, body, data["decisions"]
            self.accepted += 1
            return Response(status_code=200)
        if revision == self.latest and body == self._body:
            self.resends += 1
            return Response(status_code=200)
        self.order_violations += 1
        return Response(f"revision {revision} after {self.latest}", status_code=409)

    def app(self) -> Starlette:
        """The agent's HTTP application."""
        return Starlette(routes=[Route("/snapshots", self.receive, methods=["POST"])])


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the summary: what was measured, what was expected, whether it held."""

    name: str
    value: int | str
    expected: int | str
    ok: bool


@dataclass
class _Plan:
    """What the nodes will send, and so what the detector must end with."""

    new: dict[str, list[EventIn]]
    duplicates: int
    bad_signatures: int
    decisions: int
    hot_hits: int


def _plan(nodes: list[str], *, background: int, hot: int, start: int) -> _Plan:
    v1, v2 = RULES["v1"], RULES["v2"]
    new: dict[str, list[EventIn]] = {}
    for i, node in enumerate(nodes):
        site = f"site-{i % 2}"
        wanted: list[tuple[str, str, str, int]] = []  # site, address, rule, time
        for j in range(v2.threshold):  # a burst that crosses v2 on an address of its own
            wanted.append((site, f"203.0.113.{i}", "v2", start + j * 200))
        for j in range(background):  # never reaches a threshold: two hits per address
            wanted.append(
                (site, f"198.51.{i}.{j // 2}", "v1" if j % 4 < 2 else "v2", start + j * 7_000)
            )
        for j in range(hot):  # one shared key for every node
            wanted.append(("site-0", _HOT_ADDRESS, "v1", start + j * 10))
        events = [
            EventIn(request_id=f"{node}-{n}", site=s, address=a, rule_version=r, occurred_ms=t)
            for n, (s, a, r, t) in enumerate(wanted)
        ]
        random.Random(i).shuffle(events)
        new[node] = events
    total_hot = hot * len(nodes)
    return _Plan(
        new=new,
        duplicates=sum(len(e) // 4 for e in new.values()),
        bad_signatures=2 * len(nodes),
        decisions=len(nodes) + (1 if total_hot >= v1.threshold else 0),
        hot_hits=total_hot,
    )


async def _node(
    client: httpx.AsyncClient,
    ingest: str,
    node: str,
    key: bytes,
    events: list[EventIn],
    bad: int,
    answers: Counter[str],
) -> None:
    async def post(body: bytes, signature: str) -> int:
        response = await client.post(
            f"{ingest}/events",
            content=body,
            headers={
                "content-type": "application/json",
                "x-node-id": node,
                "x-signature": signature,
            },
        )
        return response.status_code

    bodies = [e.model_dump_json().encode() for e in events]
    for n, body in enumerate(bodies):
        status = await post(body, sign_body(key, body))
        answers["accepted" if status == 202 else f"new event answered {status}"] += 1
        if n % 4 == 3:  # a node that did not see the answer sends the same request again
            again = bodies[n - 2]
            status = await post(again, sign_body(key, again))
            answers["replay" if status == 200 else f"replay answered {status}"] += 1
    for n in range(bad):  # a forged request: signed with another key
        body = bodies[n % len(bodies)]
        status = await post(body, sign_body(b"not the node's key", body))
        answers["bad signature" if status == 401 else f"forgery answered {status}"] += 1


async def _resolve(database_url: str | None, console: Console) -> str:
    if database_url:
        console.print("using the given database as it is")
        return database_url
    from jobrun.demo.fixtures import create_demo_database
    from jobrun.postgres import embedded_database_url

    server = await asyncio.to_thread(embedded_database_url)
    stamp = datetime.now(UTC).strftime("%Y%m%d_%H%M%S")
    name = f"detector_demo_{stamp}_{random.randrange(1000):03d}"
    url = await asyncio.to_thread(create_demo_database, server, name)
    console.print(f"using the embedded PostgreSQL server, fresh database {name!r}")
    return url


async def run_demo(
    database_url: str | None,
    *,
    console: Console,
    nodes: int = 4,
    agents: int = 3,
    workers: int = 3,
    background: int = 12,
    hot: int = 15,
) -> bool:
    """Run the demo end to end and print its summary; True when every check held."""
    logging.getLogger("jobrun").addHandler(logging.NullHandler())
    logging.getLogger("jobrun").propagate = False
    began = time.monotonic()
    url = await _resolve(database_url, console)
    seed = generate_seed()
    signer = Signer(seed)
    node_ids = [f"node-{i}" for i in range(nodes)]
    node_keys = {node: os.urandom(32) for node in node_ids}
    plan = _plan(node_ids, background=background, hot=hot, start=now_ms())
    agent_servers = [AgentServer(f"agent-{i}", signer.public_key) for i in range(agents)]
    answers: Counter[str] = Counter()
    stop = asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        ingest_app = await stack.enter_async_context(PgDetector(url, signer=signer, concurrency=1))
        if await ingest_app.pending_jobs() or (await ingest_app.state())["events"]:
            raise RuntimeError(
                "the demo needs a database without detector events or jobs; "
                "omit --database-url for a fresh one"
            )
        worker_apps = [
            await stack.enter_async_context(PgDetector(url, signer=signer, concurrency=4))
            for _ in range(workers)
        ]
        for agent in agent_servers:
            base = await stack.enter_async_context(serve_loopback(agent.app()))
            await ingest_app.add_agent(agent.agent_id, f"{base}/snapshots")
        ingest_asgi = create_app(ingest_app, node_keys, now_ms)
        ingest = await stack.enter_async_context(serve_loopback(ingest_asgi))
        console.print(
            f"ingest on {ingest}, {agents} agents, {workers} workers, {nodes} nodes sending"
        )
        running = [
            asyncio.create_task(app.client.run_worker(stop=stop), name=f"detector-worker-{i}")
            for i, app in enumerate(worker_apps)
        ]
        try:
            async with asyncio.timeout(_DEADLINE), httpx.AsyncClient(timeout=10) as http:
                await asyncio.gather(
                    *(
                        _node(http, ingest, n, node_keys[n], plan.new[n], 2, answers)
                        for n in node_ids
                    )
                )
                while await ingest_app.pending_jobs():  # noqa: ASYNC110 (other tasks' work)
                    await asyncio.sleep(0.1)
                rescanned = await ingest_app.scan()
        except TimeoutError:
            console.print(f"[red]the pipeline did not drain within {_DEADLINE:g}s[/red]")
            return False
        finally:
            stop.set()
            await asyncio.gather(*running, return_exceptions=True)
        state = await ingest_app.state()
    checks = _checks(plan, answers, state, agent_servers, rescanned)
    _print(console, checks, agent_servers, time.monotonic() - began)
    return all(c.ok for c in checks)


def _checks(
    plan: _Plan,
    answers: Counter[str],
    state: dict[str, Any],
    agents: list[AgentServer],
    rescanned: int,
) -> list[Check]:
    sent = sum(len(e) for e in plan.new.values())
    unexpected = sum(v for k, v in answers.items() if " answered " in k)
    targets = sorted((d[0], d[1], d[2]) for d in state["decisions"])
    in_force = sorted(
        _canonical({"site": d[0], "address": d[1], "rule_version": d[2], "expires_ms": d[5]})
        for d in state["decisions"]
    )
    hot_counted = state["counters"].get(shared_key("site-0", _HOT_ADDRESS, RULES["v1"]), 0)
    converged = sum(sorted(_canonical(d) for d in a.decisions) == in_force for a in agents)

    def check(name: str, value: int | str, expected: int | str) -> Check:
        return Check(name, value, expected, value == expected)

    return [
        check("events accepted (202)", answers["accepted"], sent),
        check("events stored, one per (node, request id)", len(state["events"]), sent),
        check("duplicates rejected (replays: 200, no new job)", answers["replay"], plan.duplicates),
        check("bad signatures rejected (401)", answers["bad signature"], plan.bad_signatures),
        check("unexpected HTTP answers", unexpected, 0),
        check("hits counted on the hot address", hot_counted, plan.hot_hits),
        check("decisions", len(state["decisions"]), plan.decisions),
        check("targets decided more than once", len(targets) - len(set(targets)), 0),
        check(
            "snapshots delivered (accepted by agents)",
            sum(a.accepted for a in agents),
            sum(1 for s in state["snapshots"] if s[3]),
        ),
        check("agents holding every decision in force", converged, len(agents)),
        check("signature failures", sum(a.signature_failures for a in agents), 0),
        check("revision-order violations", sum(a.order_violations for a in agents), 0),
        check("agents with unsent work after the durable scan", rescanned, 0),
    ]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _print(console: Console, checks: list[Check], agents: list[AgentServer], took: float) -> None:
    table = Table(title=f"detector demo ({took:.1f}s)")
    table.add_column("check")
    table.add_column("value", justify="right")
    table.add_column("expected", justify="right")
    table.add_column("", justify="center")
    for c in checks:
        table.add_row(c.name, str(c.value), str(c.expected), "ok" if c.ok else "[red]FAIL[/red]")
    console.print(table)
    for a in agents:
        console.print(
            f"{a.agent_id}: revision {a.latest}, {a.accepted} accepted, {a.resends} resends, "
            f"{len(a.decisions)} decisions"
        )
    failed = [c.name for c in checks if not c.ok]
    if failed:
        console.print(f"[red]FAILED: {', '.join(failed)}[/red]")
    else:
        console.print("all checks held")
