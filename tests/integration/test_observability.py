"""Tracing, job log context, queue stats and the Prometheus observer, in process.

The worker, the store and the metrics server are real and run on a real
database; OpenTelemetry is the real SDK with an in-memory exporter.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from jobrun import Client, NewJob
from jobrun.domain import JobState
from jobrun.errors import SchemaMissing
from jobrun.registry import JobContext, Registry
from jobrun.telemetry.hooks import JobLogFilter
from jobrun.telemetry.prometheus import MetricsServer, PrometheusObserver
from jobrun.telemetry.tracing import SPAN_NAME
from jobrun.testing import make_job


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    found = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(found))
    yield found
    found.shutdown()


async def test_the_job_span_joins_the_trace_that_enqueued_it(
    db_url: str, exporter: InMemorySpanExporter
) -> None:
    registry = Registry()
    inside: dict[str, Any] = {}

    @registry.handler("traced")
    async def traced(ctx: JobContext, payload: Any) -> None:
        inside[str(ctx.job.id)] = trace.get_current_span().get_span_context()

    @registry.handler("traced.sync")
    def traced_sync(ctx: JobContext, payload: Any) -> None:
        inside[str(ctx.job.id)] = trace.get_current_span().get_span_context()

    @registry.handler("traced.broken")
    async def broken(ctx: JobContext, payload: Any) -> None:
        raise RuntimeError("boom")

    tracer = trace.get_tracer("test")
    async with Client(registry, database_url=db_url, poll="100ms") as client:
        with tracer.start_as_current_span("request") as request:
            single = await client.enqueue(NewJob(type="traced"))
            batch = await client.enqueue_batch(
                [
                    NewJob(type="traced.sync"),
                    NewJob(type="traced", idempotency_key="k1"),
                    NewJob(type="traced.broken", max_attempts=1),
                ]
            )
        untraced = await client.enqueue(NewJob(type="traced"))
        untraced_batch = await client.enqueue_batch([NewJob(type="traced")])
        request_ctx = request.get_span_context()
        traced_jobs = [single, *batch]
        for job in traced_jobs:
            stored = await client.store.get(job.id)
            assert stored.meta == job.meta
            assert stored.meta["traceparent"].split("-")[1] == f"{request_ctx.trace_id:032x}"
        assert untraced.meta == {} and (await client.store.get(untraced.id)).meta == {}
        assert untraced_batch[0].meta == {}
        await client.run_worker(drain=True)

    spans = {s.attributes["jobrun.job.id"]: s for s in exporter.get_finished_spans()
             if s.name == SPAN_NAME}  # fmt: skip
    for job in traced_jobs:
        span = spans[str(job.id)]
        assert span.context.trace_id == request_ctx.trace_id
        assert span.parent is not None and span.parent.span_id == request_ctx.span_id
        assert [link.context.span_id for link in span.links] == [request_ctx.span_id]
        assert span.attributes["jobrun.job.type"] == job.type
        assert span.attributes["jobrun.job.attempt"] == 1
        if job.type != "traced.broken":
            # The handler ran inside the span, a sync handler's thread included.
            assert inside[str(job.id)].span_id == span.context.span_id
    assert spans[str(batch[2].id)].status.status_code is StatusCode.ERROR
    assert spans[str(single.id)].status.status_code is not StatusCode.ERROR
    lone = spans[str(untraced.id)]
    assert lone.parent is None and not lone.links
    assert lone.context.trace_id != request_ctx.trace_id


async def test_a_bulk_enqueue_under_a_span_carries_its_trace_context(
    db_url: str, exporter: InMemorySpanExporter
) -> None:
    registry = Registry()
    seen: dict[str, int] = {}

    @registry.handler("bulk")
    async def bulk(ctx: JobContext, payload: Any) -> None:
        seen[str(ctx.job.id)] = trace.get_current_span().get_span_context().trace_id

    tracer = trace.get_tracer("test")
    async with Client(registry, database_url=db_url, poll="100ms") as client:
        with tracer.start_as_current_span("import") as request:
            traced = await client.enqueue_many("bulk", [1, 2, 3])
        untraced = await client.enqueue_many("bulk", [4])
        trace_id = request.get_span_context().trace_id
        for job_id in traced:
            stored = await client.store.get(job_id)
            assert stored.meta["traceparent"].split("-")[1] == f"{trace_id:032x}"
        assert (await client.store.get(untraced[0])).meta == {}
        await client.run_worker(drain=True)
    assert [seen[str(i)] for i in traced] == [trace_id] * 3
    assert seen[str(untraced[0])] != trace_id


async def test_handler_logs_carry_the_job(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.handler.addFilter(JobLogFilter())
    caplog.set_level(logging.INFO)
    app_log = logging.getLogger("app.handlers")
    registry = Registry()

    @registry.handler("logs.async")
    async def logs_async(ctx: JobContext, payload: Any) -> None:
        app_log.info("async handler")

    @registry.handler("logs.sync")
    def logs_sync(ctx: JobContext, payload: Any) -> None:
        app_log.info("sync handler")

    async with Client(registry, database_url=db_url, queues=["q1"], poll="100ms") as client:
        first = await client.enqueue(NewJob(type="logs.async", queue="q1"))
        second = await client.enqueue(NewJob(type="logs.sync", queue="q1"))
        await client.run_worker(drain=True)
    app_log.info("outside any handler")

    records = {r.getMessage(): r for r in caplog.records if r.name == "app.handlers"}
    for message, job in (("async handler", first), ("sync handler", second)):
        record = records[message]
        assert record.job_id == str(job.id)  # type: ignore[attr-defined]
        assert record.job_type == job.type  # type: ignore[attr-defined]
        assert record.queue == "q1"  # type: ignore[attr-defined]
        assert record.attempt == 1  # type: ignore[attr-defined]
    assert not hasattr(records["outside any handler"], "job_id")


async def test_queue_stats_counts_from_run_at(db_url: str) -> None:
    async with Client(database_url=db_url) as client:
        store = client.store
        now = await store.now()
        await store.enqueue(NewJob(type="t", queue="late", run_at=now - timedelta(minutes=5)))
        await store.enqueue(NewJob(type="t", queue="late"))
        await store.enqueue(NewJob(type="t", queue="future", delay=timedelta(hours=1)))
        await store.enqueue(NewJob(type="t", queue="busy"))
        await store.claim(["busy"], "w", 10, timedelta(minutes=1))
        stats = {s.queue: s for s in await store.queue_stats()}
    assert set(stats) == {"late", "future", "busy"}
    late = stats["late"]
    assert (late.queued, late.due, late.leased) == (2, 2, 0)
    # Lag is from the oldest due run_at (5 minutes ago), not from created_at (just now).
    assert timedelta(minutes=5) <= late.lag < timedelta(minutes=6)
    future = stats["future"]
    assert (future.queued, future.due, future.leased, future.lag) == (1, 0, 0, timedelta(0))
    busy = stats["busy"]
    assert (busy.queued, busy.due, busy.leased, busy.lag) == (0, 0, 1, timedelta(0))


def _value(metrics: Any, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else float(found)


async def test_a_bulk_enqueue_is_counted_per_queue_and_type(db_url: str) -> None:
    async with Client(database_url=db_url, metrics_port=0) as client:
        metrics = client.metrics
        assert isinstance(metrics, PrometheusObserver)
        await client.enqueue_many("bulk", [{"n": n} for n in range(3)], queue="imports")
        assert _value(metrics, "jobrun_jobs_enqueued_total", queue="imports", type="bulk") == 3


async def test_client_counts_enqueues_and_serves_metrics(db_url: str) -> None:
    registry = Registry()

    all_ran = asyncio.Event()
    ran: list[str] = []

    @registry.handler("counted")
    async def counted(ctx: JobContext, payload: Any) -> Any:
        ran.append(str(ctx.job.id))

        async def commit(conn: Any) -> None:
            # Set once the last completion commits: the counters follow the commit.
            if len(ran) == 4:
                asyncio.get_running_loop().call_soon(all_ran.set)

        return commit

    async with Client(registry, database_url=db_url, metrics_port=0, poll="100ms") as client:
        metrics = client.metrics
        assert isinstance(metrics, PrometheusObserver)
        await client.enqueue(NewJob(type="counted", idempotency_key="once"))
        await client.enqueue(NewJob(type="counted", idempotency_key="once"))  # a replay
        await client.enqueue_batch([NewJob(type="counted") for _ in range(3)])
        assert _value(metrics, "jobrun_jobs_enqueued_total", queue="default", type="counted") == 4
        stop = asyncio.Event()
        runner = asyncio.create_task(client.run_worker(stop=stop))
        try:
            await all_ran.wait()
            port = client.metrics_port
            assert port
            line = 'jobrun_jobs_succeeded_total{queue="default",type="counted"} 4.0'
            # The outcome is counted once the worker hears its completion committed.
            for _ in range(200):
                body = await asyncio.to_thread(_fetch, f"http://127.0.0.1:{port}/metrics")
                if line in body:
                    break
                await asyncio.sleep(0.05)
            assert line in body
        finally:
            stop.set()
            await runner


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


async def test_readyz_is_503_on_a_database_never_migrated(empty_db_url: str) -> None:
    async with Client(database_url=empty_db_url) as client:
        with pytest.raises(SchemaMissing):
            await client.ready()
        server = MetricsServer(PrometheusObserver(), client.ready, port=0)
        await server.start()
        try:
            url = f"http://127.0.0.1:{server.port}"
            status, body = await asyncio.to_thread(_status, url + "/readyz")
            assert status == 503 and body.startswith("not ready:"), body
            assert await asyncio.to_thread(_status, url + "/healthz") == (200, "ok\n")
        finally:
            await server.close()


def _status(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_reaped_jobs_count_as_reaped_and_by_where_they_ended() -> None:
    metrics = PrometheusObserver()
    metrics.reaped(
        [
            make_job(type="r", state=JobState.QUEUED),
            make_job(type="r", state=JobState.DEAD, attempts=25),
            make_job(type="r", state=JobState.CANCELLED),
        ]
    )
    assert _value(metrics, "jobrun_jobs_reaped_total", queue="default", type="r") == 3
    assert _value(metrics, "jobrun_jobs_dead_total", queue="default", type="r") == 1
    assert _value(metrics, "jobrun_jobs_cancelled_total", queue="default", type="r") == 1
