"""``jobrun jobs list`` searching, as a user runs it: a subprocess against a real database."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

from tests.acceptance.test_cli import jobrun, ok, one_line_error

from jobrun import Client
from jobrun.domain import NewJob


def listed(output: str) -> list[str]:
    return re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", output)


def test_jobs_list_searches_by_id_payload_and_error(db_url: str) -> None:
    url = ("--database-url", db_url)
    first = ok("enqueue", "t", "--payload", '{"customer": 42, "tags": ["vip"]}', *url).strip()
    second = ok("enqueue", "t", "--payload", '{"customer": 7}', *url).strip()

    async def fail_one() -> None:
        async with Client(database_url=db_url) as client:
            await client.store.enqueue(NewJob(type="t", queue="mail", max_attempts=1))
            (held,) = await client.store.claim(["mail"], "w", 1, timedelta(minutes=1))
            await client.store.fail(held, "w", "Timeout: 100% of _budget_")

    asyncio.run(fail_one())
    every = listed(ok("jobs", "list", *url))
    failed = every[0]
    assert listed(ok("jobs", "list", "--payload", '{"customer": 42}', *url)) == [first]
    assert listed(ok("jobs", "list", "--payload", '{"tags": ["vip"]}', *url)) == [first]
    assert listed(ok("jobs", "list", "--id", second[:13].upper(), *url)) == [second]
    assert listed(ok("jobs", "list", "--id", "..." + first[-6:], *url)) == [first]
    assert listed(ok("jobs", "list", "--error", "100% OF _", *url)) == [failed]
    assert listed(ok("jobs", "list", "--error", "%", "--state", "queued", *url)) == []
    assert listed(ok("jobs", "list", "--error", "nowhere", *url)) == []


def test_jobs_list_says_where_a_bounded_search_stopped_and_continues(db_url: str) -> None:
    url = ("--database-url", db_url)
    hit = ok("enqueue", "t", "--payload", '{"hit": true}', *url).strip()
    for _ in range(3):
        ok("enqueue", "t", "--payload", '{"hit": false}', *url)
    search = ("jobs", "list", "--payload", '{"hit": true}', "--search-rows", "2", *url)
    out = ok(*search)
    assert listed(out)[:-1] == []  # only the cursor's id: no job found yet
    cut = re.search(r"searched 2 jobs and stopped there; search further: --cursor (\S+)", out)
    assert cut is not None, out
    # The next two jobs hold the hit, and the walk is at its bound again: the hit was
    # the last job it examined, and the search continues below it, finding no more.
    out = ok(*search, "--cursor", cut[1])
    assert listed(out) == [hit, hit] and f"search further: --cursor {hit}" in out
    out = ok(*search, "--cursor", hit)
    assert listed(out) == [] and "search further" not in out and "more:" not in out


def test_jobs_list_refuses_a_bad_search_naming_the_option(db_url: str) -> None:
    url = ("--database-url", db_url)
    error = one_line_error(jobrun("jobs", "list", "--payload", "{customer: 42}", *url))
    assert error.startswith('error: --payload: payload must be JSON, such as {"customer": 42}: ')
    error = one_line_error(jobrun("jobs", "list", "--id", "0193-zz", *url))
    assert error.startswith("error: --id: id must be 1 to 32 hex digits of a job id")
    error = one_line_error(jobrun("jobs", "list", "--payload", '{"a": NaN}', *url))
    assert "NaN is not JSON" in error
