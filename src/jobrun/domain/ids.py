"""Job ids (time-ordered UUIDv7s), reading an id from text, and application lock ids.

Ids are made in Python, not by the database, so a bulk enqueue knows its ids
before it writes and the jobs of one process sort in the order they were made.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from uuid import UUID, SafeUUID

from jobrun.errors import ConfigurationError, InvalidJob

__all__ = ["key_lock_id", "new_job_id", "new_job_ids", "parse_job_id"]


_MILLIS_MASK = (1 << 48) - 1
# The version nibble and the variant bits of a UUIDv7, cleared and then set
# over 80 random bits.
_UUID7_CLEAR = ((1 << 128) - 1) ^ ((0xF << 76) | (0b11 << 62))
_UUID7_SET = (0x7 << 76) | (0b10 << 62)
_ID_ENTROPY_BYTES = 10
# Randomness is read from the OS this many bytes at a time: one system call
# per 409 ids instead of one per id, which was a quarter of a NewJob's cost.
_ENTROPY_BLOCK = 4090
_SAFE_UNKNOWN = SafeUUID.unknown
_object_new = object.__new__
_object_setattr = object.__setattr__


class _IdState:
    """The id generator's state: the last id made and the unread randomness.

    One lock serialises the read-compare-write of ``last``: without it, two
    threads in one millisecond could both take the count-up branch from the
    same last id and make the same id.
    """

    __slots__ = ("entropy", "last", "lock", "offset")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last = 0
        self.entropy = b""
        self.offset = 0


_ids = _IdState()


def _fresh_ids_after_fork() -> None:
    # A child that kept its parent's unread randomness and last id would make
    # the parent's next ids too.
    global _ids
    _ids = _IdState()


if hasattr(os, "register_at_fork"):  # no fork, no hook: Windows
    os.register_at_fork(after_in_child=_fresh_ids_after_fork)


def _uuid_of(value: int) -> UUID:
    # What UUID(int=value) builds, without its argument checks (value is
    # already a 128-bit integer): about half the cost. Python 3.14's
    # UUID._from_int does the same.
    made = _object_new(UUID)
    _object_setattr(made, "int", value)
    _object_setattr(made, "is_safe", _SAFE_UNKNOWN)
    return made


def new_job_id() -> UUID:
    """Return a UUIDv7: random, but ordered by creation time.

    Time-ordered ids keep the primary-key index append-mostly and give job
    listings a stable newest-first order for free. Within one process the ids
    are strictly increasing, even inside one millisecond and across threads.
    """
    stamp = ((time.time_ns() // 1_000_000) & _MILLIS_MASK) << 80
    state = _ids
    with state.lock:
        at = state.offset
        if at + _ID_ENTROPY_BYTES > len(state.entropy):
            state.entropy, at = os.urandom(_ENTROPY_BLOCK), 0
        state.offset = at + _ID_ENTROPY_BYTES
        random = int.from_bytes(state.entropy[at : at + _ID_ENTROPY_BYTES], "big")
        # 48 bits of time, then version 7, 12 bits of rand_a, the RFC 9562
        # variant and 62 bits of rand_b.
        value = (stamp | random) & _UUID7_CLEAR | _UUID7_SET
        if value <= state.last:
            # Same millisecond (or a clock step back): count up in rand_b instead.
            value = state.last + 1
        state.last = value
    return _uuid_of(value)


def new_job_ids(count: int) -> list[UUID]:
    """Return ``count`` UUIDv7s as :func:`new_job_id` makes them, strictly increasing.

    One clock read and one draw of randomness serve them all, which is what
    makes a bulk enqueue's ids cheap.
    """
    stamp = ((time.time_ns() // 1_000_000) & _MILLIS_MASK) << 80
    size = _ID_ENTROPY_BYTES
    entropy = os.urandom(size * count)
    values = []
    state = _ids
    with state.lock:
        last = state.last
        for at in range(0, size * count, size):
            # new_job_id's arithmetic, inlined: a helper called per id made
            # bulk ids a fifth dearer.
            random = int.from_bytes(entropy[at : at + size], "big")
            value = (stamp | random) & _UUID7_CLEAR | _UUID7_SET
            if value <= last:
                value = last + 1
            last = value
            values.append(value)
        state.last = last
    return [_uuid_of(value) for value in values]


def parse_job_id(value: object) -> UUID:
    """``value`` as a job id: a UUID, or its text (what a URL, a form or ``argv`` holds).

    Every store method that takes a job id reads it through here, so a
    malformed one is an :class:`InvalidJob` naming it instead of whatever the
    database driver makes of it.
    """
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value.strip())
        except ValueError:
            pass
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise InvalidJob(f"{shown} is not a job id (a UUID)")


def key_lock_id(key: str) -> int:
    """The 64-bit lock id of an application key: the same on every host, process and version.

    The first 8 bytes of the key's BLAKE2b digest, as a signed integer (what
    ``pg_advisory_xact_lock`` takes). Python's ``hash()`` is salted per
    process, and PostgreSQL's ``hashtext`` may change between releases, so
    neither could give every worker the same id for the same key.
    """
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"a lock key must be a non-empty string, got {key!r}")
    try:
        data = key.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(f"lock key {key!r} is not valid text") from None
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)
