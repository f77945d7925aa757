"""A job type's idempotency key policy, declared with its handler (no database).

How keyed jobs are stored (replay, conflict) is the store's rule, tested on a
real server in tests/integration/test_handler_keys.py.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from jobrun import ConfigurationError, InvalidJob, JobContext, NewJob, Registry
from jobrun.job_defaults import MAX_IDEMPOTENCY_KEY, IdempotencyKeyPolicy


def keyed(policy: Any) -> Registry:
    registry = Registry()

    @registry.handler("mail.digest", idempotency_key=policy, queue="mail")
    async def digest(ctx: JobContext, payload: Any) -> None:
        return None

    return registry


def test_fields_make_a_readable_key_of_the_type_and_those_fields() -> None:
    registry = keyed(("user_id", "day"))
    job = registry.new_job("mail.digest", {"day": "2024-05-01", "user_id": 7, "style": "x"})
    assert job.idempotency_key == 'mail.digest:{"day":"2024-05-01","user_id":7}'
    assert job.queue == "mail"
    filled = registry.with_defaults(NewJob(type="mail.digest", payload={"user_id": 7, "day": 1}))
    assert filled.idempotency_key == 'mail.digest:{"day":1,"user_id":7}'


def test_a_key_past_the_limit_is_the_types_digest_of_the_fields() -> None:
    long = "x" * MAX_IDEMPOTENCY_KEY
    key = IdempotencyKeyPolicy("t", ("a",)).key_for({"a": long})
    assert key == "t:sha256:" + hashlib.sha256(f'{{"a":"{long}"}}'.encode()).hexdigest()


def test_the_callers_key_wins_and_an_explicit_none_keeps_no_key() -> None:
    registry = keyed(("user_id",))
    mine = NewJob(type="mail.digest", payload={"user_id": 1}, idempotency_key="mine")
    assert registry.with_defaults(mine).idempotency_key == "mine"
    unkeyed = NewJob(type="mail.digest", payload={"user_id": 1}, idempotency_key=None)
    assert registry.with_defaults(unkeyed).idempotency_key is None
    assert (
        registry.new_job("mail.digest", {"user_id": 1}, idempotency_key=None).idempotency_key
        is None
    )
    assert (
        registry.new_job("mail.digest", {"user_id": 1}, idempotency_key="k").idempotency_key == "k"
    )


def test_a_function_makes_the_key_or_none() -> None:
    registry = keyed(lambda p: None if p.get("urgent") else f"digest-{p['user_id']}")
    assert registry.new_job("mail.digest", {"user_id": 3}).idempotency_key == "digest-3"
    assert registry.new_job("mail.digest", {"user_id": 3, "urgent": True}).idempotency_key is None


@pytest.mark.parametrize(
    ("policy", "payload", "needle"),
    [
        (("user_id",), {"day": 1}, "this payload has no 'user_id'"),
        (("user_id",), [1, 2], "the payload is a list, not a JSON object"),
        (lambda p: p["missing"], {}, "failed on this payload: KeyError: 'missing'"),
        (lambda p: 42, {}, "returned int 42, not a string or None"),
        (lambda p: "", {}, "is 0 characters long"),
        (lambda p: "k" * 513, {}, "is 513 characters long"),
        (lambda p: "nul\x00", {}, "must not contain a NUL character"),
    ],
)
def test_a_key_that_cannot_be_made_is_refused_at_enqueue(
    policy: Any, payload: Any, needle: str
) -> None:
    registry = keyed(policy)
    for build in (
        lambda: registry.new_job("mail.digest", payload),
        lambda: registry.with_defaults(NewJob(type="mail.digest", payload=payload)),
    ):
        with pytest.raises(InvalidJob) as caught:
            build()
        assert needle in str(caught.value)
        assert "mail.digest" in str(caught.value)


@pytest.mark.parametrize("policy", ["user_id", (), ("",), (1,), 7])
def test_a_bad_policy_is_refused_when_declared(policy: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"idempotency_key of handler 'mail\.digest'"):
        keyed(policy)


def test_enqueue_many_refuses_a_keyed_type() -> None:
    with pytest.raises(InvalidJob, match="enqueue them with enqueue_batch"):
        keyed(("user_id",)).options_for_many("mail.digest", {})
    assert keyed(None).options_for_many("mail.digest", {"priority": 1}) == {
        "queue": "mail",
        "priority": 1,
    }
