"""The search terms of the jobs listing, without a database: id parts, id ranges, payload JSON."""

from __future__ import annotations

from uuid import UUID

import pytest

from jobrun.domain import (
    MAX_SEARCH_TEXT,
    JobFilter,
    error_search,
    id_range,
    payload_search,
    split_id_search,
)

ZERO, TOP = UUID(int=0), UUID(int=(1 << 128) - 1)


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("0193ab", ("0193ab", None)),
        (" 0193AB-12 ", ("0193ab12", None)),
        ("0193ab…", ("0193ab", None)),
        ("0193ab...", ("0193ab", None)),
        ("…9F2C", (None, "9f2c")),
        ("...9f2c", (None, "9f2c")),
        ("*9f-2c", (None, "9f2c")),
        ("", (None, None)),
        ("   ", (None, None)),
    ],
)
def test_a_search_box_holds_a_prefix_or_a_suffix(
    text: str, split: tuple[str | None, str | None]
) -> None:
    assert split_id_search(text) == split


@pytest.mark.parametrize("text", ["…", "0193zz", "9f2c…9f", "<b>", "1" * 33, "…-"])
def test_a_search_box_that_is_not_part_of_an_id_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="id must be 1 to 32 hex digits of a job id"):
        split_id_search(text)


def test_an_id_range_covers_the_prefix_and_stops_below_the_cursor() -> None:
    assert id_range(None, None) == (ZERO, TOP)
    low, high = id_range("0193ab", None)
    assert (str(low), str(high)) == (
        "0193ab00-0000-0000-0000-000000000000",
        "0193abff-ffff-ffff-ffff-ffffffffffff",
    )
    whole = UUID("0193ab00-0000-7000-8000-00000000aa01")
    assert id_range(whole.hex, None) == (whole, whole)
    cursor = UUID("0193ab12-0000-7000-8000-000000000000")
    assert id_range("0193ab", cursor) == (low, UUID(int=cursor.int - 1))
    # A cursor above the range leaves it whole; one below it leaves it empty.
    assert id_range("0193ab", UUID("0193ac00-0000-7000-8000-000000000000")) == (low, high)
    below = id_range("0193ab", UUID("0193aa00-0000-7000-8000-000000000000"))
    assert below[1].int < below[0].int
    empty = id_range(None, ZERO)
    assert empty[1].int < empty[0].int


def test_payload_json_is_written_compactly_and_bad_json_says_why() -> None:
    assert payload_search(' { "a" : [1, {"b": "é"}] } ') == '{"a":[1,{"b":"é"}]}'
    assert payload_search("42") == "42"
    with pytest.raises(ValueError, match="Expecting ',' delimiter: line 1 column 9"):
        payload_search('{"a": 1 "b": 2}')
    with pytest.raises(ValueError, match="Infinity is not JSON"):
        payload_search("[Infinity]")
    with pytest.raises(ValueError, match=f"at most {MAX_SEARCH_TEXT} characters"):
        payload_search("[" + "1," * MAX_SEARCH_TEXT + "1]")
    with pytest.raises(ValueError, match="nested more than"):
        payload_search("[" * 4_000 + "]" * 4_000)


def test_error_text_is_kept_as_typed_unless_no_text_column_could_hold_it() -> None:
    assert error_search(" 100%_\\ ") == " 100%_\\ "
    with pytest.raises(ValueError, match="must not contain a NUL"):
        error_search("a\x00b")
    assert not JobFilter(queue="q").searches
    assert JobFilter(error="x").searches and JobFilter(id_suffix="ab").searches
