"""``jobrun enqueue`` with a uniqueness policy, run as a subprocess as operators run it."""

from __future__ import annotations

from tests.acceptance.test_cli import jobrun


def test_enqueue_unique_by_a_field_returns_the_holder_and_says_so(db_url: str) -> None:
    args = ["enqueue", "account.sync", "--database-url", db_url, "--unique-by", "a/b"]
    first = jobrun(*args, "--payload", '{"a/b": 7, "note": 1}')
    assert first.returncode == 0, first.stderr
    again = jobrun(*args, "--payload", '{"a/b": 7, "note": 2}')
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert "a job with the same unique key exists (state queued)" in again.stderr
    other = jobrun(*args, "--payload", '{"a/b": 8}')
    assert other.stdout != first.stdout and other.stderr == ""


def test_enqueue_refuses_a_bad_policy_with_one_line_and_writes_nothing(db_url: str) -> None:
    missing = jobrun(
        "enqueue", "t", "--database-url", db_url, "--unique-by", "account", "--payload", "{}"
    )
    assert missing.returncode != 0
    assert "the payload has no field 'account'" in missing.stderr
    until = jobrun("enqueue", "t", "--database-url", db_url, "--unique-until", "forever")
    assert until.returncode != 0 and "until" in until.stderr
    period = jobrun("enqueue", "t", "--database-url", db_url, "--unique-period", "0s")
    assert period.returncode != 0 and "period must be positive" in period.stderr
    listed = jobrun("jobs", "list", "--database-url", db_url)
    assert listed.returncode == 0 and "└─" in listed.stdout
    # An empty table: its header, then its bottom border, no row between.
    rows = [line for line in listed.stdout.splitlines() if line.startswith("│")]
    assert rows == []
