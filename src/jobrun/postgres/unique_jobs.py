"""What an enqueue of a job with a uniqueness policy sends, shared by the async store and its twin.

A job with ``NewJob.unique`` goes in through ``JobInsertUnique`` (one
statement: the insert, its event, its queue's wake-up), which writes nothing
when another job holds its key; the enqueue then reads that job
(``JobGetUniqueHolder``) and returns it. The key's base is computed here
(:meth:`jobrun.domain.Unique.key_base`); the period's bucket is added by the
database (``job_unique_key``), on its own clock.
"""

from __future__ import annotations

from jobrun.domain import Unique
from jobrun.errors import InvalidJob
from jobrun.postgres.preparing import PreparedJob, job_columns
from jobrun.sqlc import unique as unique_queries

__all__ = ["STATE_BITS", "TRIES", "insert_args", "state_bits"]

STATE_BITS = {"queued": 1, "leased": 2, "succeeded": 4, "cancelled": 8, "dead": 16}
"""Each state's bit in ``jobs.unique_states``, as ``job_state_bit`` (migration 00016) gives it."""

TRIES = 3
"""How many times an enqueue tries to insert or find the holder: the holder can
leave its states between a refused insert and the read that looks for it."""


def state_bits(unique: Unique) -> int:
    """``unique_states`` for ``unique``: the bits of the states a job holds its key in."""
    bits = 0
    for state in unique.states():
        bits |= STATE_BITS[state]
    return bits


def _policy(item: PreparedJob) -> Unique:
    unique = item.job.unique
    assert unique is not None  # only jobs with a policy come here
    return unique


def _base(item: PreparedJob) -> str:
    try:
        return _policy(item).key_base(item.job.type, item.payload)
    except ValueError as exc:
        raise InvalidJob(f"job of type {item.job.type!r} is refused: {exc}") from None


def insert_args(
    item: PreparedJob, channel: str, meta: dict[str, str] | None
) -> unique_queries.JobInsertUniqueParams:
    """The parameters of ``job_insert_unique`` for one prepared job with a policy.

    Raises InvalidJob when the policy's ``by`` names a field the payload lacks.
    """
    unique = _policy(item)
    return unique_queries.JobInsertUniqueParams(
        **job_columns(item),
        meta=meta,
        unique_base=_base(item),
        period=unique.period,
        unique_states=state_bits(unique),
        channel=channel,
    )
