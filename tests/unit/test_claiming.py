"""The claim arithmetic on its own: how many jobs a worker asks for, and when it waits."""

from __future__ import annotations

import pytest

from jobrun.worker.claiming import (
    CLAIM_AHEAD_MAX,
    ClaimPlan,
    ahead_patience,
    ahead_target,
    free_slots,
    plan_claim,
)


def plan(
    *, concurrency: int = 10, executing: int = 0, held: int = 0, buffered: int = 0, wanted: int = 0
) -> ClaimPlan:
    return plan_claim(
        concurrency=concurrency,
        executing=executing,
        held=held,
        buffered=buffered,
        wanted=wanted,
    )


def test_an_idle_worker_claims_one_job_per_slot() -> None:
    assert plan() == ClaimPlan(limit=10, ahead=0, wait=False)


def test_a_busy_worker_claims_for_its_free_slots_only() -> None:
    assert plan(executing=4, held=4) == ClaimPlan(limit=6, ahead=0, wait=False)


def test_jobs_reporting_their_outcome_get_a_second_allowance_and_no_more() -> None:
    # Every handler finished but ten outcomes are still being recorded: the
    # leases they hold count against the second allowance only.
    assert plan(executing=0, held=10).limit == 10
    assert plan(executing=2, held=15).limit == 5
    full = plan(executing=0, held=20)
    assert full.limit == 0 and full.wait


def test_every_slot_taken_means_wait() -> None:
    assert plan(executing=10, held=10) == ClaimPlan(limit=0, ahead=0, wait=True)


def test_with_every_slot_taken_a_busy_worker_claims_its_buffer_ahead() -> None:
    claim = plan(executing=10, held=10, wanted=8)
    assert claim == ClaimPlan(limit=8, ahead=8, wait=False)


def test_the_buffer_is_refilled_only_once_half_of_it_has_gone() -> None:
    # Five of eight still buffered: a claim for three would be small, so wait.
    assert plan(executing=10, held=10, buffered=5, wanted=8).wait
    # Four of eight: the claim for four goes out.
    claim = plan(executing=10, held=10, buffered=4, wanted=8)
    assert claim == ClaimPlan(limit=4, ahead=4, wait=False)


def test_buffered_jobs_fill_free_slots_before_a_claim_does() -> None:
    # Five slots free, three jobs buffered that will start in them: claim two.
    assert plan(executing=5, held=5, buffered=3, wanted=3) == ClaimPlan(2, 0, False)


def test_the_buffer_never_lifts_the_bound_on_leases_by_more_than_its_size() -> None:
    # Twenty leases held (the whole allowance) and a buffer of eight wanted:
    # eight more, never more than 2 x concurrency + the buffer in all.
    claim = plan(executing=0, held=20, wanted=8)
    assert claim.limit == 8
    assert 20 + claim.limit == 2 * 10 + 8
    assert plan(executing=0, held=20, buffered=4, wanted=8).limit == 4


def test_a_claim_for_the_buffer_reports_what_it_lacks_so_it_offers_no_handoff() -> None:
    assert plan(executing=10, held=10, wanted=6).ahead == 6
    assert plan(executing=3, held=3, buffered=6, wanted=6).ahead == 0


@pytest.mark.parametrize(
    ("concurrency", "executing", "held", "expected"),
    [(10, 0, 0, 10), (10, 7, 7, 3), (10, 0, 18, 2), (10, 0, 25, -5)],
)
def test_free_slots_is_the_smaller_of_the_two_allowances(
    concurrency: int, executing: int, held: int, expected: int
) -> None:
    assert free_slots(concurrency, executing, held) == expected


def test_the_buffer_holds_claim_ahead_worth_of_starts_capped_by_concurrency() -> None:
    assert ahead_target(1000.0, 0.05, concurrency=10) == 50
    assert ahead_target(1000.0, 0.05, concurrency=2) == CLAIM_AHEAD_MAX * 2
    assert ahead_target(0.0, 0.05, concurrency=10) == 0
    assert ahead_target(1000.0, 0.0, concurrency=10) == 0


def test_a_buffered_job_waits_ten_times_claim_ahead_and_at_least_half_a_second() -> None:
    assert ahead_patience(0.2) == pytest.approx(2.0)
    assert ahead_patience(0.05) == pytest.approx(0.5)
    assert ahead_patience(0.0) == pytest.approx(0.5)
