"""Job options declared with the handler (issue 30, item 5): real PostgreSQL.

``@registry.handler(type, queue=..., priority=..., max_attempts=..., backoff=...)``
declares a type's defaults once. ``registry.new_job`` and a client holding
the registry fill them into the fields the caller did not set; what the caller
sets, even to the value NewJob would default to, wins. A producer without the
registry, and a type that declares nothing, enqueue as before.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from jobrun import (
    Backoff,
    BackoffKind,
    Client,
    ConfigurationError,
    JobContext,
    NewJob,
    Registry,
    SyncClient,
)
from jobrun.domain import DEFAULT_BACKOFF
from jobrun.testing import RecordingProducer

SLOW = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(seconds=42))


def make_registry() -> Registry:
    registry = Registry()

    @registry.handler("mail.welcome", queue="mail", priority=5, max_attempts=3, backoff=SLOW)
    async def welcome(ctx: JobContext, payload: Any) -> None:
        return None

    @registry.handler("plain")
    async def plain(ctx: JobContext, payload: Any) -> None:
        return None

    return registry


def stored(db_url: str) -> dict[str, tuple[str, int, int, Any]]:
    """Each job's queue, priority, max attempts and backoff base, by its id."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT id, queue, priority, max_attempts, backoff_base FROM jobs")
        return {str(r[0]): (r[1], r[2], r[3], r[4]) for r in rows}


def options_of(job: NewJob) -> tuple[str, int, int, Backoff]:
    return job.queue, job.priority, job.max_attempts, job.backoff


DECLARED = ("mail", 5, 3, SLOW)
NEWJOB_DEFAULTS = ("default", 0, NewJob(type="t").max_attempts, DEFAULT_BACKOFF)


def test_new_job_fills_in_the_declared_defaults_and_explicit_options_win() -> None:
    registry = make_registry()
    assert options_of(registry.new_job("mail.welcome", {})) == DECLARED
    mine = registry.new_job("mail.welcome", {}, queue="default", priority=0)
    assert options_of(mine) == ("default", 0, 3, SLOW)
    assert options_of(registry.new_job("plain", {})) == NEWJOB_DEFAULTS


def test_with_defaults_fills_only_the_fields_the_caller_did_not_set() -> None:
    registry = make_registry()
    assert options_of(registry.with_defaults(NewJob(type="mail.welcome"))) == DECLARED
    # Written out, even with NewJob's own default value, it is the caller's choice.
    given = NewJob(type="mail.welcome", queue="default", max_attempts=25)
    assert options_of(registry.with_defaults(given)) == ("default", 5, 25, SLOW)
    plain = NewJob(type="plain")
    assert registry.with_defaults(plain) is plain
    unknown = NewJob(type="someone.else")
    assert registry.with_defaults(unknown) is unknown
    assert dict(registry.defaults_for("plain")) == {}
    assert dict(registry.defaults_for("mail.welcome")) == {
        "queue": "mail",
        "priority": 5,
        "max_attempts": 3,
        "backoff": SLOW,
    }


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"queue": "a b"}, "default queue of handler 'bad' is invalid: queue name 'a b'"),
        ({"queue": ""}, "default queue of handler 'bad' is invalid"),
        ({"priority": 99999}, "default priority of handler 'bad' is invalid"),
        ({"max_attempts": 0}, "default max_attempts of handler 'bad' is invalid"),
        ({"backoff": "fast"}, "default backoff of handler 'bad' is invalid"),
    ],
)
def test_a_bad_declared_default_is_refused_when_declared(
    options: dict[str, Any], needle: str
) -> None:
    registry = Registry()
    with pytest.raises(ConfigurationError) as caught:

        @registry.handler("bad", **options)
        async def bad(ctx: JobContext, payload: Any) -> None:
            return None

    assert needle in str(caught.value)
    assert "\n" not in str(caught.value)
    assert "bad" not in registry


async def test_client_applies_the_defaults_in_enqueue_batch_and_many(db_url: str) -> None:
    registry = make_registry()
    async with Client(registry, database_url=db_url) as client:
        one = await client.enqueue(NewJob(type="mail.welcome"))
        mine = await client.enqueue(NewJob(type="mail.welcome", queue="default", priority=1))
        plain = await client.enqueue(NewJob(type="plain"))
        batch = await client.enqueue_batch(
            [NewJob(type="mail.welcome"), NewJob(type="mail.welcome", max_attempts=7)]
        )
        many = await client.enqueue_many("mail.welcome", [{}, {}])
        many_mine = await client.enqueue_many("mail.welcome", [{}], queue="bulk")
    rows = stored(db_url)
    declared = ("mail", 5, 3)
    assert rows[str(one.id)][:3] == declared
    assert rows[str(one.id)][3] == SLOW.base
    assert rows[str(mine.id)][:3] == ("default", 1, 3)
    assert rows[str(plain.id)][:3] == NEWJOB_DEFAULTS[:3]
    assert [rows[str(j.id)][:3] for j in batch] == [declared, ("mail", 5, 7)]  # type: ignore[union-attr]
    assert [rows[str(i)][:3] for i in many] == [declared, declared]
    assert rows[str(many_mine[0])][:3] == ("bulk", 5, 3)
    assert rows[str(many[0])][3] == SLOW.base


def test_sync_client_applies_the_defaults_in_enqueue_batch_and_many(db_url: str) -> None:
    with SyncClient(make_registry(), database_url=db_url) as jobs:
        one = jobs.enqueue(NewJob(type="mail.welcome"))
        mine = jobs.enqueue(NewJob(type="mail.welcome", priority=0))
        batch = jobs.enqueue_batch([NewJob(type="mail.welcome"), NewJob(type="plain")])
        many = jobs.enqueue_many("mail.welcome", [{}], max_attempts=9)
    rows = stored(db_url)
    assert rows[str(one.id)][:3] == ("mail", 5, 3)
    assert rows[str(mine.id)][:3] == ("mail", 0, 3)
    assert [rows[str(j.id)][:3] for j in batch] == [("mail", 5, 3), NEWJOB_DEFAULTS[:3]]  # type: ignore[union-attr]
    assert rows[str(many[0])][:3] == ("mail", 5, 9)
    assert rows[str(one.id)][3] == SLOW.base


def test_a_producer_without_the_registry_enqueues_as_before(db_url: str) -> None:
    with SyncClient(database_url=db_url) as jobs:
        job = jobs.enqueue(NewJob(type="mail.welcome"))
    assert stored(db_url)[str(job.id)][:3] == NEWJOB_DEFAULTS[:3]


async def test_the_recording_producer_applies_them_as_a_client_holding_the_registry() -> None:
    recorder = RecordingProducer(make_registry())
    one = await recorder.enqueue(NewJob(type="mail.welcome"))
    mine = await recorder.enqueue(NewJob(type="mail.welcome", queue="default"))
    (many,) = await recorder.enqueue_many("mail.welcome", [{}], priority=1)
    assert (one.queue, one.priority, one.max_attempts) == ("mail", 5, 3)
    assert (mine.queue, mine.priority) == ("default", 5)
    assert (await recorder.get(many)).priority == 1
    assert (await recorder.get(many)).queue == "mail"
