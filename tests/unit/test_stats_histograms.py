"""Histograms of durations: bucket edges and percentiles read from them."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from jobrun.domain import HISTOGRAM_BUCKETS, Histogram, OutcomeCounts, TypeStats, bucket_upper_ms


def test_bucket_edges_grow_by_the_square_root_of_two_and_the_last_is_open() -> None:
    assert bucket_upper_ms(0) == pytest.approx(math.sqrt(2))
    assert bucket_upper_ms(13) == pytest.approx(128)
    assert bucket_upper_ms(HISTOGRAM_BUCKETS - 1) == math.inf


def test_a_percentile_is_the_upper_edge_of_the_bucket_it_falls_in() -> None:
    counts = [0] * HISTOGRAM_BUCKETS
    counts[13] = 90  # 90.5 ms to 128 ms
    counts[20] = 10  # 1,024 ms to 1,448 ms
    histogram = Histogram.of(counts)
    assert histogram.count == 100
    assert histogram.percentile(50) == timedelta(milliseconds=128)
    assert histogram.percentile(90) == timedelta(milliseconds=128)
    assert histogram.percentile(91) == timedelta(milliseconds=2**10.5)
    assert histogram.percentile(100) == timedelta(milliseconds=2**10.5)


def test_the_open_last_bucket_reports_its_start_and_an_empty_histogram_nothing() -> None:
    counts = [0] * HISTOGRAM_BUCKETS
    counts[-1] = 1
    assert Histogram.of(counts).percentile(99) == timedelta(milliseconds=2**23.5)
    assert Histogram.of(None).percentile(99) is None
    with pytest.raises(ValueError, match="above 0 and at most 100"):
        Histogram.of(None).percentile(0)


def test_merging_adds_outcomes_and_histograms_and_rates_follow() -> None:
    one = TypeStats(
        queue="q",
        type="a",
        outcomes=OutcomeCounts(succeeded=3, failed=1),
        wait=Histogram.of([1]),
        run=Histogram.of([0, 2]),
    )
    two = TypeStats(
        queue="q",
        type="b",
        outcomes=OutcomeCounts(dead=1, cancelled=4),
        wait=Histogram.of([1]),
        run=Histogram.of([0, 1]),
    )
    merged = TypeStats.merged([one, two], queue="q", type="")
    assert merged.outcomes == OutcomeCounts(3, 1, 1, 4)
    assert merged.outcomes.attempts == 5
    assert merged.outcomes.failure_rate == pytest.approx(0.4)
    assert merged.wait.counts[0] == 2 and merged.run.counts[1] == 3
    assert OutcomeCounts(cancelled=2).failure_rate is None
