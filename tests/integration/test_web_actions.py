"""The dashboard's actions called directly on a real store, without HTTP.

Each action is the one function both the page form and the API route run,
so what it decides is checked here once: it refuses a bad name or id with
one clear error and changes nothing, records its actor, logs once it is
done, and :func:`jobrun.web.actions.refusal_status` gives the status both
routes answer with.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from jobrun import Client
from jobrun.domain import JobState, NewJob
from jobrun.errors import ConfigurationError, InvalidTransition, JobNotFound, ScheduleNotFound
from jobrun.web import actions
from jobrun.web.bodies import BadRequest

ACTOR = "ops via web"


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[Client]:
    async with Client(database_url=db_url) as opened:
        yield opened


@pytest.mark.parametrize(
    "action", [actions.pause_queue, actions.resume_queue, actions.clear_queue_limits]
)
async def test_a_queue_action_refuses_a_bad_queue_name_with_one_clear_error(
    client: Client, action: Callable[..., Awaitable[Any]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobrun.web")
    with pytest.raises(ConfigurationError, match="must not contain ','") as refused:
        await action(client.store, name="mail,default", actor=ACTOR)
    assert "\n" not in str(refused.value)
    assert actions.refusal_status(refused.value) == 400
    assert await client.store.list_queues() == []
    assert [r for r in caplog.records if r.name == "jobrun.web"] == []


async def test_setting_limits_refuses_a_bad_queue_name_and_changes_nothing(
    client: Client,
) -> None:
    with pytest.raises(ConfigurationError, match="queue name must not be empty") as refused:
        await actions.set_queue_limits(client.store, name="", concurrency=2, rate=None, actor=ACTOR)
    assert actions.refusal_status(refused.value) == 400
    assert await client.store.list_queues() == []


async def test_queue_actions_record_and_log_their_actor(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobrun.web")
    paused = await actions.pause_queue(client.store, name="billing/eu", actor=ACTOR)
    assert paused.paused and paused.changed_by == ACTOR
    limited = await actions.set_queue_limits(
        client.store,
        name="billing/eu",
        concurrency=None,
        rate=(5, timedelta(minutes=1)),
        actor=ACTOR,
    )
    assert limited.rate_limit == 5 and limited.concurrency_limit is None
    assert [r.getMessage() for r in caplog.records if r.name == "jobrun.web"] == [
        "queue 'billing/eu' pause by ops via web",
        "queue 'billing/eu' limits: concurrency None, rate 5/60s by ops via web",
    ]


async def test_a_job_action_refuses_an_id_that_is_not_a_job_id(client: Client) -> None:
    for action in (actions.cancel_job, actions.retry_job):
        with pytest.raises(ValueError) as refused:
            await action(client.store, job_id="not-a-uuid", actor=ACTOR)
        assert actions.refusal_status(refused.value) == 400


async def test_job_actions_answer_a_missing_job_404_and_a_wrong_state_409(
    client: Client,
) -> None:
    missing = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(JobNotFound) as gone:
        await actions.retry_job(client.store, job_id=missing, actor=ACTOR)
    assert actions.refusal_status(gone.value) == 404
    job = await client.store.enqueue(NewJob(type="t", queue="mail"))
    with pytest.raises(InvalidTransition) as conflict:
        await actions.retry_job(client.store, job_id=str(job.id), actor=ACTOR)
    assert actions.refusal_status(conflict.value) == 409
    cancelled = await actions.cancel_job(client.store, job_id=str(job.id), actor=ACTOR)
    assert cancelled.state is JobState.CANCELLED
    [*_, event] = await client.store.events(job.id)
    assert event.kind == "cancelled" and event.detail == f"by {ACTOR}"


async def test_a_schedule_action_on_a_missing_schedule_is_404(client: Client) -> None:
    with pytest.raises(ScheduleNotFound) as gone:
        await actions.pause_schedule(client.store, name="nope", actor=ACTOR)
    assert actions.refusal_status(gone.value) == 404


async def test_bulk_skips_the_jobs_it_does_not_apply_to_with_their_reason(
    client: Client,
) -> None:
    queued = await client.store.enqueue(NewJob(type="t", queue="mail"))
    done = await actions.bulk(client.store, action="retry", ids=[queued.id], flt=None, actor=ACTOR)
    assert done["action"] == "retry" and done["done"] == []
    assert list(done["skipped"]) == [str(queued.id)]
    cancelled = await actions.bulk(
        client.store, action="cancel", ids=[queued.id], flt=None, actor=ACTOR
    )
    assert cancelled["done"] == [str(queued.id)] and cancelled["skipped"] == {}


def test_a_refused_request_keeps_its_own_status() -> None:
    assert actions.refusal_status(BadRequest("missing or wrong CSRF token", 403)) == 403
    assert actions.refusal_status(BadRequest("too big", 413)) == 413
