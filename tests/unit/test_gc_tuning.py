"""The worker's garbage-collector tuning: raised while held, put back after, never lowered."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from jobrun._gc_tuning import OBJECTS_PER_SLOT, threshold_for_worker, young_threshold_raised


@pytest.fixture(autouse=True)
def _thresholds_restored() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*before)


def test_raises_the_young_threshold_while_held_and_puts_everything_back() -> None:
    gc.set_threshold(700, 11, 12)
    with young_threshold_raised(10_000):
        assert gc.get_threshold() == (10_000, 11, 12)
    assert gc.get_threshold() == (700, 11, 12)


def test_none_leaves_the_collector_alone() -> None:
    gc.set_threshold(700, 10, 10)
    with young_threshold_raised(None):
        assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("chosen", [20_000, 10_000, 0])
def test_a_higher_threshold_or_a_disabled_collector_is_kept(chosen: int) -> None:
    gc.set_threshold(chosen, 10, 10)
    with young_threshold_raised(10_000):
        assert gc.get_threshold() == (chosen, 10, 10)
    assert gc.get_threshold() == (chosen, 10, 10)


def test_nested_holders_share_one_raise_and_the_last_one_out_restores() -> None:
    gc.set_threshold(700, 10, 10)
    outer = young_threshold_raised(10_000)
    inner = young_threshold_raised(50_000)
    outer.__enter__()
    inner.__enter__()
    # The second holder does not raise it again: one raise per process.
    assert gc.get_threshold()[0] == 10_000
    outer.__exit__(None, None, None)
    assert gc.get_threshold()[0] == 10_000, "restored while a worker still runs"
    inner.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_workers_in_two_threads_restore_once_both_have_stopped() -> None:
    gc.set_threshold(700, 10, 10)
    entered, release = threading.Barrier(3), threading.Event()

    def hold() -> None:
        with young_threshold_raised(10_000):
            entered.wait()
            release.wait()

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    entered.wait()
    assert gc.get_threshold()[0] == 10_000
    release.set()
    for t in threads:
        t.join()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_threshold_someone_changed_meanwhile_is_not_clobbered() -> None:
    gc.set_threshold(700, 10, 10)
    with young_threshold_raised(10_000):
        gc.set_threshold(3_000, 10, 10)
    assert gc.get_threshold() == (3_000, 10, 10)


def test_a_raising_block_still_restores() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), young_threshold_raised(10_000):
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_worker_raises_the_threshold_per_slot_when_its_slots_would_fill_it() -> None:
    assert threshold_for_worker(10_000, 100) == 10_000
    assert threshold_for_worker(10_000, 10_000 // OBJECTS_PER_SLOT) == 10_000
    assert threshold_for_worker(10_000, 1000) == 1000 * OBJECTS_PER_SLOT
    assert threshold_for_worker(100_000, 1000) == 100_000
    assert threshold_for_worker(None, 1000) is None  # off stays off
