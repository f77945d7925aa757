"""Bad input is refused by the domain with a message naming the field and the limit.

None of these cases may escape as a raw psycopg error, an OverflowError or a
RecursionError: the models refuse them at construction (pydantic's
ValidationError), and the store's shared checks refuse them again with
InvalidJob when a model was built without validation.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import pickle
import sys
import threading
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from typing import Any
from uuid import UUID, SafeUUID

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from jobrun.config import Config
from jobrun.domain import (
    MAX_ATTEMPTS_LIMIT,
    MAX_DELAY,
    MAX_PAYLOAD_DEPTH,
    MAX_PRIORITY,
    MIN_PRIORITY,
    RUN_AT_LIMIT,
    Backoff,
    BackoffKind,
    JobFilter,
    NewJob,
    NewSchedule,
    SchedulePatch,
    duration_problem,
    jobs_alike,
    new_job_id,
    new_job_ids,
    new_job_problem,
    payload_problem,
    queue_name_problem,
)
from jobrun.errors import ConfigurationError, InvalidJob, InvalidSchedule
from jobrun.postgres.convert import encode_payload

MAX_BYTES = 1 << 20


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def message(exc: BaseException) -> str:
    # The models raise jobrun's errors with pydantic's ValidationError as the cause.
    cause = exc if isinstance(exc, ValidationError) else exc.__cause__
    assert isinstance(cause, ValidationError), exc
    return "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in cause.errors())


# -- item 6: text fields ----------------------------------------------------------------


@pytest.mark.parametrize("field", ["type", "queue", "idempotency_key"])
@pytest.mark.parametrize(("bad", "needle"), [("a\x00b", "nul"), ("a\ud800b", "unicode")])
def test_new_job_refuses_nul_and_surrogates_in_text_fields(
    field: str, bad: str, needle: str
) -> None:
    values: dict[str, Any] = {"type": "t", field: bad}
    with pytest.raises(InvalidJob) as info:
        NewJob(**values)
    assert field in message(info.value) and needle in message(info.value).lower()


@pytest.mark.parametrize("field", ["name", "type", "queue", "timezone", "cron"])
def test_new_schedule_refuses_nul_in_text_fields(field: str) -> None:
    values: dict[str, Any] = {"name": "s", "type": "t", "cron": "* * * * *", field: "a\x00"}
    with pytest.raises(InvalidSchedule) as info:
        NewSchedule(**values)
    assert field in message(info.value) and "NUL" in message(info.value)


@pytest.mark.parametrize("field", ["type", "queue", "timezone", "cron"])
def test_schedule_patch_refuses_nul_in_text_fields(field: str) -> None:
    with pytest.raises(InvalidSchedule, match="NUL"):
        SchedulePatch(**{field: "a\x00"})


def test_job_filter_refuses_nul() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        JobFilter(queue="a\x00")


# -- item 6 and 11: payloads ------------------------------------------------------------


def test_lone_surrogate_in_payload_is_invalid_job_naming_the_path() -> None:
    with pytest.raises(InvalidJob, match=r"payload\[\"s\"\].*surrogate"):
        encode_payload("t", {"s": "\ud800"}, MAX_BYTES)
    with pytest.raises(InvalidJob, match=r"payload\[1\].*surrogate"):
        encode_payload("t", ["ok", "x\udfff"], MAX_BYTES)
    with pytest.raises(InvalidJob, match=r"key.*surrogate"):
        encode_payload("t", {"\ud800": 1}, MAX_BYTES)


def test_a_real_astral_character_is_accepted() -> None:
    assert json.loads(encode_payload("t", {"s": "😀"}, MAX_BYTES)) == {"s": "😀"}


def test_nul_in_payload_value_or_key_is_invalid_job_naming_the_path() -> None:
    with pytest.raises(InvalidJob, match=r"payload\[\"a\"\]\[0\].*NUL"):
        encode_payload("t", {"a": ["x\x00"]}, MAX_BYTES)
    with pytest.raises(InvalidJob, match=r"key.*NUL"):
        encode_payload("t", {"k\x00": 1}, MAX_BYTES)


def test_backslash_u0000_text_is_not_a_nul() -> None:
    # The text C:\u0000dir: a backslash followed by "u0000", no NUL anywhere.
    payload = {"path": "C:\\u0000dir"}
    assert json.loads(encode_payload("t", payload, MAX_BYTES)) == payload
    assert payload_problem(payload) is None


def test_payload_nesting_limit() -> None:
    assert json.loads(encode_payload("t", nested(MAX_PAYLOAD_DEPTH), MAX_BYTES))
    with pytest.raises(InvalidJob, match=f"nested more than {MAX_PAYLOAD_DEPTH} levels"):
        encode_payload("t", nested(MAX_PAYLOAD_DEPTH + 1), MAX_BYTES)
    deep_list: Any = []
    for _ in range(MAX_PAYLOAD_DEPTH):
        deep_list = [deep_list]
    with pytest.raises(InvalidJob, match="nested more than"):
        encode_payload("t", deep_list, MAX_BYTES)


def test_payload_nested_5000_levels_is_invalid_job_not_recursion_error() -> None:
    with pytest.raises(InvalidJob, match="nested more than"):
        encode_payload("t", nested(5000), MAX_BYTES)


def test_a_payload_that_holds_itself_is_invalid_job_naming_the_depth() -> None:
    # The store's encoder keeps no circular-reference markers: a cycle is
    # reported as what it is to jsonb, nesting without end.
    cyclic: dict[str, Any] = {"a": [1]}
    cyclic["a"].append(cyclic)
    with pytest.raises(InvalidJob, match=r"payload of job type 't' is refused: .*nested more"):
        encode_payload("t", cyclic, MAX_BYTES)


# Text jsonb stores: no NUL, no surrogate (those are refused, tested above).
_stored_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"))
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _stored_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_stored_text, inner, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_the_store_encodes_a_payload_as_the_public_json_encoder_does(value: Any) -> None:
    public = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert encode_payload("t", value, 1 << 30) == public


def test_non_json_values_are_refused_as_the_public_encoder_refuses_them() -> None:
    with pytest.raises(InvalidJob, match="not valid JSON: Out of range float"):
        encode_payload("t", {"x": float("inf")}, MAX_BYTES)
    with pytest.raises(InvalidJob, match="not valid JSON: Object of type set"):
        encode_payload("t", [{1}], MAX_BYTES)


def test_new_job_with_a_5000_level_payload_names_the_limit() -> None:
    with pytest.raises(InvalidJob) as info:
        NewJob(type="t", payload=nested(5000))
    text = message(info.value)
    assert f"{MAX_PAYLOAD_DEPTH} levels" in text
    assert len(str(info.value)) < 2000  # not one "dict.a" per level


def test_wide_payloads_with_many_containers_pass() -> None:
    payload = {"rows": [{"id": i, "tags": [str(i)]} for i in range(500)]}
    assert json.loads(encode_payload("t", payload, MAX_BYTES)) == payload


json_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | json_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(json_text, children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_valid_payloads_round_trip(payload: Any) -> None:
    assert json.loads(encode_payload("t", payload, MAX_BYTES)) == payload


@given(json_text, json_text)
def test_escaped_looking_text_round_trips(before: str, after: str) -> None:
    # Backslashes next to text that looks like escapes are just characters.
    payload = {before: before + "\\u0000" + after + "\\ud800"}
    assert json.loads(encode_payload("t", payload, MAX_BYTES)) == payload


@given(json_text, json_text)
def test_a_nul_anywhere_is_refused(before: str, after: str) -> None:
    with pytest.raises(InvalidJob, match="NUL"):
        encode_payload("t", [before + "\x00" + after], MAX_BYTES)


# -- item 7: durations and times --------------------------------------------------------


def test_delay_beyond_the_limit_is_refused() -> None:
    NewJob(type="t", delay=MAX_DELAY)
    with pytest.raises(InvalidJob, match="delay must be at most 100 years"):
        NewJob(type="t", delay=timedelta(days=3_000_000))
    with pytest.raises(InvalidJob, match="delay must not be negative"):
        NewJob(type="t", delay=timedelta(seconds=-1))


def test_run_at_must_be_before_the_year_9999() -> None:
    NewJob(type="t", run_at=RUN_AT_LIMIT - timedelta(seconds=1))
    minus5 = timezone(timedelta(hours=-5))
    for late in (RUN_AT_LIMIT, datetime(9999, 12, 31, 23, 0, tzinfo=minus5)):
        with pytest.raises(InvalidJob, match="run_at must be before 9999-01-01"):
            NewJob(type="t", run_at=late)
    with pytest.raises(InvalidJob, match="run_at must not be before 1970"):
        NewJob(type="t", run_at=datetime(1, 1, 1, 1, tzinfo=timezone(timedelta(hours=5))))


def test_backoff_max_is_bounded() -> None:
    # The delay arithmetic itself runs in the database (job_backoff_delay);
    # tests/integration/test_store.py drives it to these same extremes.
    with pytest.raises(InvalidJob, match="backoff max must be at most 100 years"):
        Backoff(base=timedelta(seconds=1), max=timedelta(days=999_999))
    Backoff(kind=BackoffKind.LINEAR, base=MAX_DELAY, max=MAX_DELAY)


def test_schedule_interval_is_bounded() -> None:
    with pytest.raises(InvalidSchedule, match="every must be at most 100 years"):
        NewSchedule(name="s", type="t", every=timedelta(days=3_000_000))
    with pytest.raises(InvalidSchedule, match="every must be at most 100 years"):
        SchedulePatch(every=timedelta(days=3_000_000))
    with pytest.raises(InvalidSchedule, match="every must be positive"):
        SchedulePatch(every=timedelta(0))
    # Under the scheduler's one look a second, an interval would say what never happens.
    with pytest.raises(InvalidSchedule, match="every must be at least 1s, not 999ms"):
        NewSchedule(name="s", type="t", every=timedelta(milliseconds=999))
    with pytest.raises(InvalidSchedule, match="every must be at least 1s, not 10ms"):
        SchedulePatch(every=timedelta(milliseconds=10))
    assert NewSchedule(name="s", type="t", every=timedelta(seconds=1)).every == timedelta(seconds=1)


def test_duration_problem() -> None:
    assert duration_problem("older_than", timedelta(days=7)) is None
    assert duration_problem("older_than", timedelta(0)) is None
    assert "at most 100 years" in str(duration_problem("older_than", timedelta(days=99_999)))
    assert "negative" in str(duration_problem("older_than", timedelta(days=-1)))


# -- item 8: priority and max_attempts --------------------------------------------------


def test_max_attempts_is_bounded_in_the_model() -> None:
    NewJob(type="t", max_attempts=MAX_ATTEMPTS_LIMIT)
    with pytest.raises(InvalidJob, match=str(MAX_ATTEMPTS_LIMIT)):
        NewJob(type="t", max_attempts=3_000_000_000)
    with pytest.raises(InvalidSchedule, match=str(MAX_ATTEMPTS_LIMIT)):
        NewSchedule(name="s", type="t", cron="* * * * *", max_attempts=3_000_000_000)
    with pytest.raises(InvalidSchedule, match=str(MAX_ATTEMPTS_LIMIT)):
        SchedulePatch(max_attempts=3_000_000_000)
    with pytest.raises(InvalidSchedule, match="1"):
        SchedulePatch(max_attempts=0)


def test_priority_is_bounded_in_every_model() -> None:
    NewJob(type="t", priority=MIN_PRIORITY)
    NewJob(type="t", priority=MAX_PRIORITY)
    with pytest.raises(InvalidJob, match=str(MAX_PRIORITY)):
        NewJob(type="t", priority=99_999)
    with pytest.raises(InvalidSchedule, match=str(MAX_PRIORITY)):
        NewSchedule(name="s", type="t", cron="* * * * *", priority=99_999)
    with pytest.raises(InvalidSchedule, match=str(MAX_PRIORITY)):
        SchedulePatch(priority=99_999)
    with pytest.raises(InvalidSchedule, match=str(MIN_PRIORITY)):
        SchedulePatch(priority=-99_999)


# -- issue 27, items 6 and 12: queue names ----------------------------------------------

BAD_QUEUE_NAMES = [
    ("mail,default", "must not contain ','"),
    ("mail default", "whitespace"),
    (" mail", "whitespace"),
    ("mail\t", "whitespace"),
    ("mail\u00a0", "whitespace"),
    ("mail\x7f", "control or format"),
    ("mail\u200b", "control or format"),
    ("mail\u202e", "control or format"),
    (".", "must not be '.'"),
    ("..", "must not be '..'"),
    ("", "must not be empty"),
    ("x" * 129, "at most 128"),
]


@pytest.mark.parametrize(("name", "needle"), BAD_QUEUE_NAMES)
def test_one_queue_name_rule_for_jobs_schedules_and_config(name: str, needle: str) -> None:
    problem = queue_name_problem(name)
    assert problem is not None and needle in problem
    if name:  # pydantic's own length check answers for the empty name
        with pytest.raises(InvalidJob, match=needle):
            NewJob(type="t", queue=name)
        with pytest.raises(InvalidSchedule, match=needle):
            NewSchedule(name="s", type="t", cron="* * * * *", queue=name)
        with pytest.raises(InvalidSchedule, match=needle):
            SchedulePatch(queue=name)
        with pytest.raises(ConfigurationError, match=needle):
            Config(queues=["ok", name])
        job = NewJob(type="t").model_copy(update={"queue": name})
        assert needle in (new_job_problem(job) or "")


@pytest.mark.parametrize("name", ["billing/eu", "../queues/victim", "a.b", "...", "élan", "50%"])
def test_a_queue_name_may_hold_slashes_dots_and_other_text(name: str) -> None:
    assert queue_name_problem(name) is None
    assert NewJob(type="t", queue=name).queue == name
    assert Config(queues=[name]).queues == [name]


def test_a_listing_still_filters_by_a_name_stored_before_the_rule() -> None:
    assert JobFilter(queue="mail,default").queue == "mail,default"


def test_config_reads_a_queue_list_by_commas_and_whitespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBRUN_QUEUE", "mail,default  reports")
    assert Config().queues == ["mail", "default", "reports"]


# -- the store's re-check of models built without validation ----------------------------


@pytest.mark.parametrize(
    ("update", "needle"),
    [
        ({"type": "a\x00"}, "type"),
        ({"queue": "q\ud800"}, "queue"),
        ({"idempotency_key": "k\x00"}, "idempotency_key"),
        ({"priority": 99_999}, "priority"),
        ({"max_attempts": 3_000_000_000}, "max_attempts"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"delay": timedelta(days=3_000_000)}, "delay"),
        ({"run_at": datetime(9999, 6, 1, tzinfo=UTC)}, "run_at"),
    ],
)
def test_new_job_problem_catches_what_model_copy_skipped(
    update: dict[str, Any], needle: str
) -> None:
    job = NewJob(type="t").model_copy(update=update)
    problem = new_job_problem(job)
    assert problem is not None and needle in problem


def test_new_job_problem_passes_a_valid_job() -> None:
    assert new_job_problem(NewJob(type="t", idempotency_key="k", delay=timedelta(1))) is None


def test_job_ids_are_uuid7_strictly_increasing_alone_or_in_bulk() -> None:
    made = [new_job_id() for _ in range(1_000)] + new_job_ids(5_000) + [new_job_id()]
    assert all(a < b for a, b in pairwise(made))
    assert {u.version for u in made} == {7}
    assert {u.variant for u in made} == {"specified in RFC 4122"}
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    stamp = made[-1].int >> 80
    assert now_ms - 5_000 <= stamp <= now_ms + 1, "the first 48 bits are the time in milliseconds"
    assert new_job_ids(0) == []


def test_job_ids_made_by_many_threads_at_once_are_all_different() -> None:
    # A tiny switch interval makes threads interleave inside the generator;
    # unlocked, two of them took the count-up branch from one last id.
    made: list[list[UUID]] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:

        def make() -> None:
            mine = [new_job_id() for _ in range(5_000)]
            mine += new_job_ids(5_000)
            made.append(mine)

        threads = [threading.Thread(target=make) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert sum(len(ids) for ids in made) == len({i for ids in made for i in ids}) == 80_000
    assert all(all(a < b for a, b in pairwise(ids)) for ids in made)


def _ids_in_a_child(conn: Any) -> None:
    conn.send([new_job_id() for _ in range(200)] + new_job_ids(200))


def test_a_forked_child_does_not_make_its_parents_ids() -> None:
    new_job_id()  # the parent has drawn randomness and made an id before the fork
    fork = multiprocessing.get_context("fork")
    ours, theirs = fork.Pipe()
    child = fork.Process(target=_ids_in_a_child, args=(theirs,))
    child.start()
    parent_ids = [new_job_id() for _ in range(200)] + new_job_ids(200)
    child_ids = ours.recv()
    child.join()
    assert child.exitcode == 0
    assert not set(parent_ids) & set(child_ids)
    # Not even the random bits repeat: a child that inherited the unread
    # randomness would make the parent's ids, a few milliseconds apart.
    rand_b = (1 << 62) - 1
    assert not {u.int & rand_b for u in parent_ids} & {u.int & rand_b for u in child_ids}


def test_a_job_id_is_a_plain_uuid() -> None:
    made = new_job_id()
    twin = UUID(str(made))
    assert made == twin and hash(made) == hash(twin) and str(made) == str(twin)
    assert type(made) is UUID and made.is_safe is SafeUUID.unknown
    assert pickle.loads(pickle.dumps(made)) == made and copy.deepcopy(made) == made


def test_a_payload_deeper_than_the_limit_in_a_bulk_call_names_its_index() -> None:
    deep: Any = 1
    for _ in range(MAX_PAYLOAD_DEPTH + 400):
        deep = [deep]
    with pytest.raises(InvalidJob, match=f"payload 1 .* more than {MAX_PAYLOAD_DEPTH} levels"):
        jobs_alike("t", [1, deep])
    with pytest.raises(InvalidJob, match="take no idempotency_key"):
        jobs_alike("t", [1], idempotency_key="k")
    with pytest.raises(InvalidJob, match="take no colour"):
        jobs_alike("t", [1], colour="red")
