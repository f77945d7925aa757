"""What the dashboard reads from a request, checked in one place before any action runs.

The JSON API's bodies and the pages' form fields go through the same readers
(a job filter, job ids, a bulk action, queue limits), so both refuse the same
input with the same one-line reason. Every reader raises :class:`BadRequest`
and changes nothing: a body that is not a JSON object, a field of the wrong
type, a field the action does not take, a number that is not a whole number
in range. A body is read whole but never past :data:`MAX_BODY_BYTES`, and a
nesting too deep for the parser is a refusal, not a ``RecursionError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import ValidationError
from starlette.requests import Request

from jobrun.domain import (
    MAX_CONCURRENCY_LIMIT,
    MAX_DELAY,
    MAX_QUEUE_LIMIT,
    Job,
    JobFilter,
    JobState,
    describe_invalid,
    error_search,
    payload_search,
    split_id_search,
)
from jobrun.errors import JobNotFound

__all__ = [
    "BULK_ACTIONS",
    "FILTER_FIELDS",
    "MAX_BODY_BYTES",
    "MAX_BULK_IDS",
    "SEARCH_FIELDS",
    "BadRequest",
    "Unconfirmed",
    "bulk_from_body",
    "bulk_from_form",
    "confirmed_count",
    "job_filter",
    "job_result",
    "json_body",
    "limits",
    "listing",
    "no_fields",
]

MAX_BODY_BYTES = 1 << 20
"""The largest API body read: 10,000 job ids take about 400 kB."""
MAX_BULK_IDS = 10_000
"""The most job ids one bulk request may name (a whole filter is bounded alike)."""
BULK_ACTIONS = ("retry", "cancel", "delete")
FILTER_FIELDS = ("queue", "state", "type", "after", "before")
"""The fields of a filter a bulk action takes."""
SEARCH_FIELDS = ("id", "error", "payload")
"""The search fields of the jobs listing (page and API): never taken by a bulk action."""
_BULK_SEARCH_REFUSED = (
    "a bulk action on a whole filter takes no search (id, error, payload): "
    "select the jobs the search found and act on the selection"
)
_WHOLE = re.compile(r"[+-]?[0-9]+")
_MAX_SECONDS = int(MAX_DELAY.total_seconds())


class BadRequest(ValueError):
    """A request refused before any action: answered with ``status`` and the one-line message.

    Bad input is a 400 (or 413, 415); the guard refuses a read-only
    dashboard's actions and a missing CSRF token with a 403 the same way.
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Unconfirmed(BadRequest):
    """A delete sent without the confirmation it asks for: nothing was done (409).

    ``confirm`` is what to send back in the ``confirm`` field to go ahead (a
    schedule's name, or how many jobs a queue's clear deletes); ``title`` and
    ``detail`` are what the page asking for it says.
    """

    def __init__(self, message: str, *, confirm: str | int, title: str, detail: str) -> None:
        super().__init__(message, 409)
        self.confirm = confirm
        self.title = title
        self.detail = detail


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


async def json_body(request: Request) -> dict[str, Any]:
    """The JSON object a POST carries; ``{}`` for an empty body.

    Refused: a body over :data:`MAX_BODY_BYTES` (413), a non-empty body that
    is not ``application/json`` (415), text that is not JSON, and JSON that
    is not an object (``[]``, ``"x"``, ``5``, ``null``).
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BadRequest(f"the body is over {MAX_BODY_BYTES} bytes", 413)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    if not request.headers.get("content-type", "").startswith("application/json"):
        raise BadRequest("send the body as JSON (Content-Type: application/json)", 415)
    try:
        value = json.loads(raw)
    except RecursionError:
        raise BadRequest("the body is not a request: it is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, a number too long to read
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadRequest(f"the body is not valid JSON: {reason}") from None
    if not isinstance(value, dict):
        raise BadRequest(f"the body must be a JSON object, not {_kind(value)}")
    return value


def _only(body: Mapping[str, Any], allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    for key in body:
        if key not in allowed:
            takes = f"it takes {', '.join(allowed)}" if allowed else "it takes no fields"
            raise BadRequest(f"unexpected field {key!r}: {takes}")


def no_fields(body: Mapping[str, Any]) -> None:
    """Refuse any field: the action (cancel, retry, pause, resume, clear) takes none."""
    _only(body, ())


def _text(field: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{field} must be a string, not {_kind(value)}")
    return value.strip() or None


def _time(field: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        shown = repr(value[:40])
        raise BadRequest(
            f"{field} must be a date and time like 2026-01-31T12:00, not {shown}"
        ) from None
    # datetime-local inputs carry no zone: the dashboard shows and reads UTC.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _search(params: Mapping[str, Any]) -> dict[str, str | None]:
    """The search fields: ``id`` (a prefix, or a suffix after ``…``), ``error``, ``payload``."""
    error = params.get("error")
    payload = _text("payload", params.get("payload"))
    try:
        prefix, suffix = split_id_search(_text("id", params.get("id")) or "")
        return {
            "id_prefix": prefix,
            "id_suffix": suffix,
            # The error's own spaces count: " 42" is not "42".
            "error": error_search(error) if isinstance(error, str) and error.strip() else None,
            "payload": None if payload is None else payload_search(payload),
        }
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def job_filter(params: Mapping[str, Any]) -> JobFilter:
    """The job filter in query parameters, a form or a JSON object (other keys are ignored).

    Besides the listing's filters it reads the search fields (:data:`SEARCH_FIELDS`).
    """
    state = _text("state", params.get("state"))
    if state is not None and state not in {s.value for s in JobState}:
        choices = ", ".join(s.value for s in JobState)
        raise BadRequest(f"unknown state {state!r}: choose one of {choices}")
    if params.get("error") is not None and not isinstance(params.get("error"), str):
        raise BadRequest(f"error must be a string, not {_kind(params.get('error'))}")
    search = _search(params)
    try:
        return JobFilter(
            queue=_text("queue", params.get("queue")),
            state=JobState(state) if state else None,
            type=_text("type", params.get("type")),
            created_after=_time("after", _text("after", params.get("after"))),
            created_before=_time("before", _text("before", params.get("before"))),
            **search,
        )
    except ValidationError as exc:
        raise BadRequest(describe_invalid("filter", exc)) from None


def _no_search(flt: JobFilter) -> JobFilter:
    """Refuse a bulk action on a whole filter that holds a search: it could reach past what
    the search has shown (a search examines a bounded number of jobs per page)."""
    if flt.searches:
        raise BadRequest(_BULK_SEARCH_REFUSED)
    return flt


def listing(params: Mapping[str, Any]) -> tuple[JobFilter, UUID | None]:
    """The filter and the page cursor of a jobs listing's query (the page's and the API's)."""
    flt = job_filter(params)
    cursor = UUID(params["cursor"]) if params.get("cursor") else None
    return flt, cursor


def _job_ids(values: Any) -> list[UUID]:
    if not isinstance(values, list):
        raise BadRequest(f"ids must be an array of job ids, not {_kind(values)}")
    if len(values) > MAX_BULK_IDS:
        raise BadRequest(f"ids names {len(values)} jobs: at most {MAX_BULK_IDS} at once")
    ids = []
    for value in values:
        if not isinstance(value, str):
            raise BadRequest(f"ids must hold job ids (strings), not {_kind(value)}")
        try:
            ids.append(UUID(value))
        except ValueError:
            raise BadRequest(f"{value[:60]!r} in ids is not a job id (a UUID)") from None
    return ids


def _action(value: Any) -> str:
    if value not in BULK_ACTIONS:
        shown = repr(value) if isinstance(value, str) else _kind(value)
        raise BadRequest(f"unknown bulk action {shown}: use retry, cancel or delete")
    return str(value)


def bulk_from_body(body: Mapping[str, Any]) -> tuple[str, list[UUID], JobFilter | None]:
    """The API's bulk request: ``action``, and ``ids`` or a ``filter`` object (not both)."""
    _only(body, ("action", "ids", "filter", "confirm"))
    action = _action(body.get("action"))
    if ("ids" in body) == ("filter" in body):
        raise BadRequest("give ids (an array of job ids) or a filter (an object), one of them")
    if "filter" in body:
        flt = body["filter"]
        if not isinstance(flt, dict):
            raise BadRequest(f"filter must be an object, not {_kind(flt)}")
        if any(key in flt for key in SEARCH_FIELDS):
            raise BadRequest(_BULK_SEARCH_REFUSED)
        _only(flt, FILTER_FIELDS)
        return action, [], job_filter(flt)
    return action, _job_ids(body["ids"]), None


def confirmed_count(values: Any) -> int | None:
    """The ``confirm`` of a bulk delete: how many jobs its sender agreed to delete (0 too)."""
    value = values.get("confirm")
    if value in (0, "0"):
        return 0
    try:
        return _whole("confirm", value, 10**9)
    except BadRequest:
        raise BadRequest(
            "confirm must be the number of jobs the delete takes (0 or more)"
        ) from None


def bulk_from_form(form: Any) -> tuple[str, list[UUID], JobFilter | None]:
    """The jobs page's bulk form: the action, and the selected ids or the whole filter."""
    action = _action(form.get("action"))
    scope = form.get("scope") or "selected"
    if scope == "filter":
        return action, [], _no_search(job_filter(form))
    if scope != "selected":
        raise BadRequest(f"unknown scope {scope!r}: use selected or filter")
    return action, _job_ids(form.getlist("ids")), None


def _whole(field: str, value: Any, most: int) -> int | None:
    """``value`` as a whole number from 1 to ``most``: an int, or its digits in a form field."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        number = int(value.strip()[:40])  # 40 digits are out of range already
    else:
        shown = repr(value[:40]) if isinstance(value, str) else _kind(value)
        raise BadRequest(f"{field} must be a whole number, not {shown}")
    if not 1 <= number <= most:
        shown = str(number) if len(str(abs(number))) <= 20 else "a number of over 20 digits"
        raise BadRequest(f"{field} must be between 1 and {most}, not {shown}")
    return number


def limits(
    values: Mapping[str, Any],
) -> tuple[int | None, tuple[int, timedelta] | None, int | None]:
    """The limits of a limits form or body: concurrency, rate (``rate`` per
    ``rate_seconds``) and ``per_key`` (the limit per concurrency key).

    A blank field is not given; ``rate_seconds`` defaults to 1 when ``rate``
    is given and is refused without it.
    """
    _only(values, ("concurrency", "rate", "rate_seconds", "per_key"))
    per_key = _whole("per_key", values.get("per_key"), MAX_CONCURRENCY_LIMIT)
    concurrency = _whole("concurrency", values.get("concurrency"), MAX_QUEUE_LIMIT)
    count = _whole("rate", values.get("rate"), MAX_QUEUE_LIMIT)
    seconds = _whole("rate_seconds", values.get("rate_seconds"), _MAX_SECONDS)
    if count is None and seconds is not None:
        raise BadRequest("rate_seconds needs a rate (claims per that many seconds)")
    if concurrency is None and count is None and per_key is None:
        raise BadRequest("give a concurrency limit, a rate, or both; or a limit per key")
    rate = (count, timedelta(seconds=seconds or 1)) if count is not None else None
    return concurrency, rate, per_key


async def job_result(store: Any, job: Job) -> Any:
    """What ``job``'s handler returned, once it succeeded; None otherwise (or if purged since)."""
    if job.state is not JobState.SUCCEEDED:
        return None
    try:
        return (await store.result_of(job.id)).value
    except JobNotFound:
        return None
