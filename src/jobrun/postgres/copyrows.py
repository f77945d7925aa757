"""Binary COPY data for the jobs a batch inserts, encoded in one pass per job.

Why: psycopg's COPY encodes a row field by field through its dumpers (a
Python call for the UUID and one for the JSON), about 2.5 microseconds a
job, plus an awaited ``write_row`` per job. In a batch most columns hold the
same value for every job (a bulk enqueue shares all but the id and the
payload), so their bytes are encoded once and copied; the rest are packed
with :mod:`struct`. The result goes to the server in one ``write``.

The statements are the generated ``JobInsertCopy`` and
``JobInsertCopyTraced`` (db/query/jobs.py); the column order they name is
checked against the order encoded here when this module is imported, so a
changed query cannot be fed rows of the old shape.

PostgreSQL's binary COPY format: a signature and two zero words, then per row
the field count (int16) and per field its byte length (int32, -1 for NULL)
and bytes, then -1 (int16). The values' binary forms are the types' send
functions: a uuid's 16 bytes, text and an enum label as UTF-8, jsonb as
version byte 1 and the JSON text, int2/int4 big-endian, timestamptz as
microseconds since 2000-01-01 UTC (int64), interval as microseconds (int64),
days and months (int32 each).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from uuid import UUID

from jobrun.domain import Backoff
from jobrun.sqlc import jobs as job_queries

__all__ = ["SIGNATURE", "TRAILER", "JobCopyEncoder", "copy_data", "copy_slice"]

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" * 2
"""What binary COPY data starts with."""
TRAILER = b"\xff\xff"
"""What binary COPY data ends with."""

_COLUMNS = (
    "id", "queue", "type", "payload", "priority", "max_attempts", "backoff_kind",
    "backoff_base", "backoff_max", "run_at", "idempotency_key", "created_at", "updated_at",
)  # fmt: skip
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_NULL = b"\xff\xff\xff\xff"
_UUID_HEAD = b"\x00\x00\x00\x10"
_int32 = struct.Struct(">i").pack
_head_plain = struct.Struct(">h").pack(len(_COLUMNS)) + _UUID_HEAD
_head_traced = struct.Struct(">h").pack(len(_COLUMNS) + 1) + _UUID_HEAD
_int2 = struct.Struct(">ih").pack
_int4 = struct.Struct(">ii").pack
_timestamp = struct.Struct(">iq").pack
_interval = struct.Struct(">iqii").pack


def _copy_columns(sql: str) -> tuple[str, ...]:
    found = re.search(r"COPY\s+jobs\s*\(([^)]*)\)", sql)
    if found is None:  # pragma: no cover - the generated statement is a COPY
        raise RuntimeError(f"not a COPY into jobs: {sql!r}")
    return tuple(c.strip() for c in found.group(1).split(","))


if _copy_columns(job_queries.JOB_INSERT_COPY) != _COLUMNS or _copy_columns(
    job_queries.JOB_INSERT_COPY_TRACED
) != (*_COLUMNS, "meta"):  # pragma: no cover - only a changed query gets here
    raise RuntimeError(
        "JobInsertCopy's columns changed: update jobrun.postgres.copyrows to the new order"
    )


def _text(value: str) -> bytes:
    data = value.encode()
    return _int32(len(data)) + data


def _jsonb(text: str) -> bytes:
    data = text.encode()
    return _int32(len(data) + 1) + b"\x01" + data


def _micros(value: timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


def _timestamptz(value: datetime) -> bytes:
    return _timestamp(8, _micros(value - _EPOCH))


def _interval_of(value: timedelta) -> bytes:
    # As PostgreSQL reads a timedelta: its days as days, the rest as time.
    return _interval(16, value.seconds * 1_000_000 + value.microseconds, value.days, 0)


class JobCopyEncoder:
    """Encodes the rows of one batch; the bytes of values seen before are reused.

    ``created_at`` is the batch's database now (UTC); ``meta`` its trace
    context, which selects the traced statement's shape (one more column).
    """

    def __init__(self, created_at: datetime, meta: Mapping[str, str] | None = None) -> None:
        self._traced = meta is not None
        self._head = _head_traced if self._traced else _head_plain
        # created_at and updated_at, then (traced) meta: the same for every row.
        self._tail = _timestamptz(created_at) * 2
        if meta is not None:
            self._tail += _jsonb(json.dumps(dict(meta), separators=(",", ":")))
        self._texts: dict[str, bytes] = {}
        self._policies: dict[tuple[Backoff, int, int], bytes] = {}
        self._times: dict[datetime, bytes] = {}

    @property
    def statement(self) -> str:
        """The generated COPY statement these rows are for."""
        return job_queries.JOB_INSERT_COPY_TRACED if self._traced else job_queries.JOB_INSERT_COPY

    def _cached_text(self, value: str) -> bytes:
        found = self._texts.get(value)
        if found is None:
            found = self._texts[value] = _text(value)
        return found

    def _middle(self, priority: int, max_attempts: int, backoff: Backoff) -> bytes:
        """priority, max_attempts and the backoff policy's three columns."""
        key = (backoff, priority, max_attempts)
        found = self._policies.get(key)
        if found is None:
            found = self._policies[key] = (
                _int2(2, priority)
                + _int4(4, max_attempts)
                + _text(backoff.kind.value)
                + _interval_of(backoff.base)
                + _interval_of(backoff.max)
            )
        return found

    def _run_at(self, run_at: datetime) -> bytes:
        found = self._times.get(run_at)
        if found is None:
            if len(self._times) >= 1024:
                self._times.clear()
            found = self._times[run_at] = _timestamptz(run_at)
        return found

    def row(
        self,
        job_id: UUID,
        queue: str,
        job_type: str,
        payload_text: str,
        priority: int,
        max_attempts: int,
        backoff: Backoff,
        run_at: datetime,
        idempotency_key: str | None,
    ) -> bytes:
        """One job's row; ``payload_text`` is the payload's JSON, already encoded."""
        payload = payload_text.encode()
        return b"".join(
            (
                self._head,
                job_id.bytes,
                self._cached_text(queue),
                self._cached_text(job_type),
                _int32(len(payload) + 1),
                b"\x01",
                payload,
                self._middle(priority, max_attempts, backoff),
                self._run_at(run_at),
                _NULL if idempotency_key is None else _text(idempotency_key),
                self._tail,
            )
        )

    def alike(
        self,
        ids: Sequence[UUID],
        texts: Sequence[str],
        *,
        queue: str,
        job_type: str,
        priority: int,
        max_attempts: int,
        backoff: Backoff,
        run_at: datetime,
    ) -> Iterable[bytes]:
        """The rows of jobs alike but for their ids and payload texts (a bulk enqueue)."""
        head = self._head
        before = self._cached_text(queue) + self._cached_text(job_type)
        after = (
            self._middle(priority, max_attempts, backoff)
            + self._run_at(run_at)
            + _NULL
            + self._tail
        )
        int32 = _int32
        for job_id, text in zip(ids, texts, strict=True):
            payload = text.encode()
            yield b"".join(
                (head, job_id.bytes, before, int32(len(payload) + 1), b"\x01", payload, after)
            )


def copy_data(rows: Iterable[bytes]) -> bytes:
    """A whole binary COPY stream of ``rows``."""
    return b"".join((SIGNATURE, *rows, TRAILER))


def copy_slice(rows: Iterable[bytes]) -> bytes:
    """``rows`` as one piece of a binary COPY stream (its signature and trailer sent apart)."""
    return b"".join(rows)
