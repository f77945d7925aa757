"""SyncClient: a sync service's jobrun, from the same Config as the workers.

On a real database: a job enqueued in the caller's own transaction commits or
rolls back with it; payloads are checked against the registry's models; the
notification goes out on the configured channel, so an async worker built
from an equal Config (the same JOBRUN_* variables) wakes and runs the job.
"""

from __future__ import annotations

import psycopg
import pytest
from pydantic import BaseModel

from jobrun import Config, InvalidJob, JobContext, NewJob, Registry, SyncClient
from jobrun.domain import JobState
from jobrun.errors import ConfigurationError


class Welcome(BaseModel):
    user_id: int


def make_registry(seen: list[int]) -> Registry:
    registry = Registry()

    @registry.handler("mail.welcome", payload=Welcome)
    async def welcome(ctx: JobContext, payload: Welcome) -> None:
        seen.append(payload.user_id)

    return registry


def test_a_job_enqueued_in_the_callers_transaction_commits_or_rolls_back_with_it(
    db_url: str,
) -> None:
    with SyncClient(database_url=db_url) as jobs, psycopg.connect(db_url) as conn:
        with conn.transaction():
            kept = jobs.enqueue(NewJob(type="t"), conn=conn)
        with pytest.raises(RuntimeError), conn.transaction():
            dropped = jobs.enqueue(NewJob(type="t"), conn=conn)
            raise RuntimeError("the caller's transaction fails")
        assert jobs.get(kept.id).state is JobState.QUEUED
        assert jobs.store.depth()[0].count == 1
        assert dropped.id != kept.id


def test_payloads_are_checked_against_the_registrys_models(db_url: str) -> None:
    with SyncClient(make_registry([]), database_url=db_url) as jobs:
        with pytest.raises(InvalidJob, match="user_id"):
            jobs.enqueue(NewJob(type="mail.welcome", payload={"user_id": "seven"}))
        assert jobs.store.depth() == []
        ids = jobs.enqueue_many("mail.welcome", [{"user_id": 1}, {"user_id": 2}], priority=3)
        assert [jobs.get(i).priority for i in ids] == [3, 3]


def test_the_notification_goes_out_on_the_channel_the_config_names(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The channel comes from the same setting the workers read (here the
    # environment, as for a fleet): nothing to keep in step by hand.
    monkeypatch.setenv("JOBRUN_NOTIFY_CHANNEL", "jobrun_sync_client_test")
    monkeypatch.setenv("JOBRUN_DATABASE_URL", db_url)
    assert Config().notify_channel == "jobrun_sync_client_test"
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute("LISTEN jobrun_sync_client_test")
        with SyncClient() as jobs:
            jobs.enqueue(NewJob(type="t", queue="mail"))
        heard = [n for n in listener.notifies(timeout=10, stop_after=1)]
    assert [n.channel for n in heard] == ["jobrun_sync_client_test"]


def test_using_a_closed_client_says_so(db_url: str) -> None:
    jobs = SyncClient(database_url=db_url)
    with pytest.raises(ConfigurationError, match="not open"):
        jobs.enqueue(NewJob(type="t"))
