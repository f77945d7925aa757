"""Uniqueness policies on their own: what they accept, and which jobs share a key."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobrun.domain import NewJob, Unique, UniqueUntil
from jobrun.errors import ConfigurationError, InvalidJob
from jobrun.registry import JobContext, Registry


def test_until_defaults_to_finished_and_to_purged_with_a_period() -> None:
    assert Unique().lasts is UniqueUntil.FINISHED
    assert Unique().states() == ("queued", "leased")
    hourly = Unique(period=timedelta(hours=1))
    assert hourly.lasts is UniqueUntil.PURGED
    assert hourly.states() == ("queued", "leased", "succeeded", "cancelled", "dead")
    assert Unique(until="started").states() == ("queued",)
    assert Unique(until="started", period=timedelta(hours=1)).lasts is UniqueUntil.STARTED


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"by": ["a", "a"]}, "by names a field twice"),
        ({"by": [""]}, "by names payload fields of 1 to 255 characters"),
        ({"by": ["x" * 256]}, "by names payload fields of 1 to 255 characters"),
        ({"until": "forever"}, "until"),
        ({"period": timedelta(0)}, "period must be positive"),
        ({"period": timedelta(milliseconds=500)}, "period must be from 1 second to 366 days"),
        ({"period": timedelta(days=367)}, "period must be"),
    ],
)
def test_a_bad_policy_is_refused_naming_what_is_wrong(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidJob, match=problem):
        Unique(**fields)


def test_jobs_share_a_key_by_type_and_the_chosen_fields_only() -> None:
    by_account = Unique(by=["account"])
    key = by_account.key_base("sync", {"account": 7, "reason": "a"})
    assert key == by_account.key_base("sync", {"reason": "b", "account": 7})
    assert key != by_account.key_base("sync", {"account": 8})
    assert key != by_account.key_base("sync.other", {"account": 7})
    assert len(key) == 64
    whole = Unique()
    assert whole.key_base("t", {"a": 1, "b": 2}) == whole.key_base("t", {"b": 2, "a": 1})
    assert whole.key_base("t", {"a": 1, "b": 2}) != whole.key_base("t", {"a": 1, "b": 3})
    type_only = Unique(by=[])
    assert type_only.key_base("t", {"a": 1}) == type_only.key_base("t", [1, 2])
    # Policies of different fields never share a key, even on equal values.
    assert Unique(by=["a"]).key_base("t", {"a": 1, "b": 1}) != Unique(by=["b"]).key_base(
        "t", {"a": 1, "b": 1}
    )


def test_field_names_and_values_with_separators_do_not_collide() -> None:
    policy = Unique(by=["a/b", "..", "c,d"])
    one = policy.key_base("t", {"a/b": "x,y", "..": "/", "c,d": ".."})
    two = policy.key_base("t", {"a/b": "x", "..": "y,/", "c,d": ".."})
    assert one != two


def test_a_payload_without_the_fields_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="the payload has no field 'account'"):
        Unique(by=["account"]).key_base("t", {"acount": 7})
    with pytest.raises(ValueError, match="needs an object payload, got list"):
        Unique(by=["account"]).key_base("t", [7])


def test_a_job_takes_an_idempotency_key_or_a_policy_not_both() -> None:
    with pytest.raises(InvalidJob, match="give an idempotency_key or a unique policy, not both"):
        NewJob(type="t", idempotency_key="k", unique=Unique())


def test_a_handler_declares_a_policy_applied_to_jobs_that_set_none() -> None:
    reg = Registry()

    @reg.handler("sync", unique=Unique(by=["account"]))
    async def sync(ctx: JobContext, payload: Any) -> None:
        return None

    filled = reg.with_defaults(NewJob(type="sync", payload={"account": 1}))
    assert filled.unique == Unique(by=["account"])
    own = reg.with_defaults(NewJob(type="sync", unique=Unique(by=[])))
    assert own.unique == Unique(by=[])
    keyed = reg.with_defaults(NewJob(type="sync", idempotency_key="k"))
    assert keyed.unique is None and keyed.idempotency_key == "k"
    with pytest.raises(ConfigurationError, match="declares idempotency_key and unique"):
        reg.register("other", sync, unique=Unique(), idempotency_key=["account"])
