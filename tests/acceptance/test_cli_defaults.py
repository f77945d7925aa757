"""``jobrun enqueue --app`` takes the job options declared with the handler (issue 30, item 5).

The command goes through a Client holding the application's registry, so a
job enqueued from the shell lands where the application's own would; an
option given on the command line wins, and without ``--app`` nothing changes.
"""

from __future__ import annotations

import psycopg
from tests.acceptance.test_cli import jobrun, ok, one_line_error

APP = "tests.acceptance.defaults_app"


def row(db_url: str, job_id: str) -> tuple[str, int, int]:
    """The job's queue, priority and max attempts as stored."""
    sql = "SELECT queue, priority, max_attempts FROM jobs WHERE id = %s"
    with psycopg.connect(db_url) as conn:
        (found,) = conn.execute(sql, (job_id,)).fetchall()
    return found[0], found[1], found[2]


def test_enqueue_with_the_app_takes_the_declared_defaults(db_url: str) -> None:
    declared = ok("enqueue", "mail.welcome", "--app", APP, "--database-url", db_url).strip()
    assert row(db_url, declared) == ("mail", 5, 3)
    mine = ok(
        "enqueue", "mail.welcome", "--app", APP, "--queue", "default", "--priority", "0",
        "--database-url", db_url,
    ).strip()  # fmt: skip
    assert row(db_url, mine) == ("default", 0, 3)
    bare = ok("enqueue", "mail.welcome", "--database-url", db_url).strip()
    assert row(db_url, bare) == ("default", 0, 25)


def test_enqueue_with_the_app_keys_the_job_by_the_declared_key_policy(db_url: str) -> None:
    url = ("--database-url", db_url)
    first = jobrun("enqueue", "mail.digest", "--app", APP, "--payload", '{"user_id": 7}', *url)
    assert first.returncode == 0, first.stderr
    again = jobrun("enqueue", "mail.digest", "--app", APP, "--payload", '{"user_id": 7}', *url)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert """replayed existing job (idempotency key 'mail.digest:{"user_id":7}'""" in again.stderr
    # A key given on the command line wins over the policy.
    mine = ok(
        "enqueue", "mail.digest", "--app", APP, "--payload", '{"user_id": 7}',
        "--idempotency-key", "mine", *url,
    ).strip()  # fmt: skip
    assert mine != first.stdout.strip()
    with psycopg.connect(db_url) as conn:
        (key,) = conn.execute("SELECT idempotency_key FROM jobs WHERE id = %s", (mine,)).fetchone()
    assert key == "mine"
    refused = jobrun("enqueue", "mail.digest", "--app", APP, "--payload", '{"day": 1}', *url)
    assert "this payload has no 'user_id'" in one_line_error(refused)
