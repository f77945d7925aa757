"""The claim arithmetic: how many jobs a worker asks for, and when it waits instead.

Pure functions of the worker's counts, so every rule is tested on its own
(tests/unit/test_claiming.py). The numbers:

* ``concurrency`` handler slots bound the work. A job whose handler has
  finished still holds its lease while its outcome is reported, so the jobs
  held in all (running or reporting) get a second allowance of the same size
  and no more: that is what keeps claims and completions pipelined.
* While the queues stay busy the worker also holds a small buffer of jobs
  claimed ahead (see :data:`jobrun.config.DEFAULT_CLAIM_AHEAD`), sized to the
  rate jobs have been starting; it never lifts the bound on leases held by
  more than its own size.
* With every slot taken, a claim for the buffer waits until half of it has
  gone, so that such claims stay large.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "CLAIM_AHEAD_MAX",
    "ClaimPlan",
    "ahead_patience",
    "ahead_target",
    "free_slots",
    "plan_claim",
]

CLAIM_AHEAD_MAX = 10
"""The buffer never holds more than this many times ``concurrency``."""
_AHEAD_PATIENCE = 10
_AHEAD_PATIENCE_MIN = 0.5


class ClaimPlan(NamedTuple):
    """What the next claim asks for (a tuple: built once per claim, on the hot path)."""

    limit: int
    """How many jobs to claim; not positive when ``wait`` is true."""
    ahead: int
    """How many jobs the buffer lacks; positive: this claim is (partly) for the buffer,
    so it offers no handoff."""
    wait: bool
    """True: claim nothing now, wait for a slot (or a buffered job's patience) instead."""


def free_slots(concurrency: int, executing: int, held: int) -> int:
    """Handler slots free now (maybe negative): ``executing`` handlers run, ``held`` leases held.

    Reporting jobs still hold leases, so ``held`` (running and reporting) is
    bounded by twice ``concurrency``.
    """
    return min(concurrency - executing, 2 * concurrency - held)


def plan_claim(
    *, concurrency: int, executing: int, held: int, buffered: int, wanted: int
) -> ClaimPlan:
    """The next claim, from ``executing`` handlers, ``held`` attempts and ``buffered`` jobs.

    ``wanted`` is the buffer's target size (:func:`ahead_target`); 0 claims
    for free slots only.
    """
    slots = max(0, free_slots(concurrency, executing, held))
    ahead = wanted - buffered
    # The buffer never lifts the bound on leases held while outcomes are
    # reported: at most the buffer on top of that allowance.
    limit = min(
        max(0, slots - buffered) + max(0, ahead),
        2 * concurrency + wanted - held - buffered,
    )
    # With every slot taken, claim ahead only once half the buffer has gone,
    # so that those claims stay large.
    wait = limit <= 0 or (slots <= buffered and 2 * ahead < wanted)
    return ClaimPlan(limit, ahead, wait)


def ahead_target(start_rate: float, claim_ahead: float, concurrency: int) -> int:
    """How many jobs to hold claimed ahead: ``claim_ahead`` seconds of starts at ``start_rate``."""
    return min(int(start_rate * claim_ahead), CLAIM_AHEAD_MAX * concurrency)


def ahead_patience(claim_ahead: float) -> float:
    """Seconds a buffered job may wait for a slot before it is handed back.

    Many times what the buffer was sized for: a job still waiting then means
    the running jobs got slower, and other workers may have free slots.
    """
    return max(_AHEAD_PATIENCE_MIN, _AHEAD_PATIENCE * claim_ahead)
