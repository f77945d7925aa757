"""The handler registry: registration, payload validation, the producer side."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from pydantic import BaseModel

from jobrun.domain import Backoff, Job, JobState
from jobrun.errors import ConfigurationError, UnknownJobType
from jobrun.registry import CancellationToken, InvalidPayload, JobContext, Registry


class EmailPayload(BaseModel):
    to: str
    subject: str = "hello"


def make_job(job_type: str = "send_email", payload: Any = None) -> Job:
    now = datetime.now(UTC)
    return Job(
        id=uuid4(),
        queue="default",
        type=job_type,
        payload={} if payload is None else payload,
        priority=0,
        state=JobState.LEASED,
        attempts=1,
        max_attempts=25,
        backoff=Backoff(),
        run_at=now,
        lease_owner="me",
        lease_expires_at=now + timedelta(seconds=30),
        cancel_requested=False,
        idempotency_key=None,
        last_error=None,
        created_at=now,
        updated_at=now,
        finished_at=None,
    )


def test_decorator_registers_and_returns_function_unchanged() -> None:
    reg = Registry()

    async def send(ctx: JobContext, payload: EmailPayload) -> None:
        return None

    assert reg.handler("send_email", payload=EmailPayload, timeout=5)(send) is send
    entry = reg.lookup("send_email")
    assert entry.is_async
    assert entry.timeout == timedelta(seconds=5)
    assert reg.payload_model("send_email") is EmailPayload
    assert list(reg) == ["send_email"]
    assert len(reg) == 1


def test_sync_handler_is_marked_sync() -> None:
    reg = Registry()

    @reg.handler("resize")
    def resize(ctx: JobContext, payload: Any) -> None:
        return None

    assert not reg.lookup("resize").is_async
    assert reg.payload_model("resize") is None


def test_registering_a_type_twice_is_a_configuration_error() -> None:
    reg = Registry()
    reg.register("a", lambda ctx, p: None)
    with pytest.raises(ConfigurationError, match="already registered"):
        reg.register("a", lambda ctx, p: None)


@pytest.mark.parametrize("bad", ["", "x" * 256])
def test_bad_type_name_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        Registry().register(bad, lambda ctx, p: None)


def test_non_positive_timeout_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        Registry().register("a", lambda ctx, p: None, timeout=0)


def test_lookup_of_unknown_type_raises_unknown_job_type() -> None:
    with pytest.raises(UnknownJobType, match="'nope'"):
        Registry().lookup("nope")
    assert Registry().get("nope") is None


def test_payload_is_validated_into_the_declared_model() -> None:
    reg = Registry()
    reg.register("send_email", lambda ctx, p: None, payload=EmailPayload)
    value = reg.lookup("send_email").parse_payload(make_job(payload={"to": "a@b"}))
    assert value == EmailPayload(to="a@b", subject="hello")


def test_optional_model_accepts_null_payload() -> None:
    reg = Registry()
    reg.register("send_email", lambda ctx, p: None, payload=EmailPayload | None)
    job = make_job().model_copy(update={"payload": None})
    assert reg.lookup("send_email").parse_payload(job) is None


def test_invalid_payload_names_type_and_field() -> None:
    reg = Registry()
    reg.register("send_email", lambda ctx, p: None, payload=EmailPayload)
    with pytest.raises(InvalidPayload) as info:
        reg.lookup("send_email").parse_payload(make_job(payload={"subject": 3}))
    message = str(info.value)
    assert "send_email" in message
    assert "to: Field required" in message
    assert "subject" in message


def test_raw_payload_without_model() -> None:
    reg = Registry()
    reg.register("raw", lambda ctx, p: None)
    assert reg.lookup("raw").parse_payload(make_job("raw", {"n": [1, 2]})) == {"n": [1, 2]}


def test_new_job_validates_and_dumps_through_the_model() -> None:
    reg = Registry()
    reg.register("send_email", lambda ctx, p: None, payload=EmailPayload)
    job = reg.new_job("send_email", EmailPayload(to="x@y"), queue="mail", priority=3)
    assert job.type == "send_email"
    assert job.payload == {"to": "x@y", "subject": "hello"}
    assert job.queue == "mail"
    assert job.priority == 3
    assert reg.new_job("send_email", {"to": "z"}).payload == {"to": "z", "subject": "hello"}
    with pytest.raises(InvalidPayload):
        reg.new_job("send_email", {"subject": "no recipient"})
    with pytest.raises(UnknownJobType):
        reg.new_job("nope", {})


def test_round_trip_producer_to_handler() -> None:
    reg = Registry()
    reg.register("send_email", lambda ctx, p: None, payload=EmailPayload)
    new = reg.new_job("send_email", EmailPayload(to="r@t", subject="s"))
    parsed = reg.lookup("send_email").parse_payload(make_job(payload=new.payload))
    assert parsed == EmailPayload(to="r@t", subject="s")


def test_uninstantiable_payload_type_is_a_configuration_error() -> None:
    class NotAType:
        pass

    with pytest.raises(ConfigurationError, match="cannot be validated"):
        Registry().register("a", lambda ctx, p: None, payload=NotAType)


def test_context_exposes_attempt_and_cancellation() -> None:
    ctx = JobContext(job=make_job())
    assert ctx.attempt == 1
    assert not ctx.cancelled
    ctx.token.set("timeout")
    ctx.token.set("later reason is ignored")
    assert ctx.cancelled
    assert ctx.token.reason == "timeout"


async def test_token_wakes_a_waiting_thread() -> None:
    token = CancellationToken()
    waiter = asyncio.create_task(asyncio.to_thread(token.wait, 5))
    await asyncio.sleep(0.05)
    token.set()
    assert await asyncio.wait_for(waiter, 2) is True
