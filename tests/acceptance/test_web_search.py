"""Searching the jobs page and ``/api/jobs`` over a real socket: by id, error text and
payload, the bound on the jobs one page examines with its "search further" link, escaping,
the state tabs keeping the search, and bulk actions refusing a search."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import httpx
import pytest
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun import Client
from jobrun.domain import Job, NewJob

EVIL = '<script>alert("x")</script> 100%_\\'


def with_client(db_url: str, body: Callable[[Client], Any]) -> Any:
    async def run() -> Any:
        async with Client(database_url=db_url) as client:
            return await body(client)

    return asyncio.run(run())


@pytest.fixture
def web(db_url: str) -> Iterator[httpx.Client]:
    # A bound of 3 jobs a search page, so that a handful of jobs reaches it.
    proc, url = serve(db_url, "--search-rows", "3")
    try:
        with httpx.Client(base_url=url, auth=(USER, PASSWORD), timeout=10) as opened:
            yield opened
    finally:
        stop(proc)


def rows(page: httpx.Response) -> list[str]:
    assert page.status_code == 200, page.text[:500]
    return re.findall(r'<tr data-id="([^"]+)">', page.text)


async def failed(client: Client, error: str, payload: dict[str, Any], **fields: Any) -> Job:
    job = await client.store.enqueue(
        NewJob(type="t", queue="mail", payload=payload, max_attempts=1, **fields)
    )
    (held,) = await client.store.claim(["mail"], "w", 1, timedelta(minutes=1))
    assert held.id == job.id
    return await client.store.fail(held, "w", error)


def test_an_id_that_names_one_job_opens_it_and_a_shared_suffix_lists_both(
    db_url: str, web: httpx.Client
) -> None:
    ids = [
        UUID("0193ab00-0000-7000-8000-0000000c9f2c"),
        UUID("0193ac00-0000-7000-8000-0000000d9f2c"),
    ]
    with_client(db_url, lambda c: c.store.enqueue_batch([NewJob(id=i, type="t") for i in ids]))
    found = web.get("/jobs", params={"id": "0193AB00-0"}, follow_redirects=False)
    assert found.status_code == 303 and found.headers["location"] == f"/jobs/{ids[0]}"
    assert str(ids[0]) in web.get("/jobs", params={"id": "0193ab"}, follow_redirects=True).text
    both = web.get("/jobs", params={"id": "…9F2C"})
    assert rows(both) == [str(ids[1]), str(ids[0])]
    one = web.get("/jobs", params={"id": "...d9f2c"}, follow_redirects=False)
    assert one.status_code == 303 and one.headers["location"] == f"/jobs/{ids[1]}"
    assert rows(web.get("/jobs", params={"id": "0193ff"})) == []
    bad = web.get("/jobs", params={"id": "0193zz"})
    assert bad.status_code == 400
    assert "id must be 1 to 32 hex digits of a job id" in html.unescape(bad.text)
    api = web.get("/api/jobs", params={"id": "*9f2c"})
    assert [j["id"] for j in api.json()["jobs"]] == [str(ids[1]), str(ids[0])]
    assert web.get("/api/jobs", params={"id": "xyz"}).status_code == 400


def test_error_and_payload_search_escape_what_they_show_and_survive_the_tabs(
    db_url: str, web: httpx.Client
) -> None:
    async def setup(client: Client) -> list[Job]:
        evil = await failed(client, f"boom {EVIL}", {"customer": 42, "tags": ["<b>"]})
        other = await failed(client, "timeout", {"customer": 7})
        await client.store.enqueue(NewJob(type="t", payload={"customer": 42}))
        return [evil, other]

    evil, other = with_client(db_url, setup)
    page = web.get("/jobs", params={"error": EVIL, "state": "dead"})
    assert rows(page) == [str(evil.id)]
    assert "<script>alert" not in page.text and "<b>" not in page.text
    # The box shows the search as typed, escaped.
    shown = re.search(r'name="error" value="([^"]*)"', page.text)
    assert shown is not None and html.unescape(shown[1]) == EVIL
    # Every tab keeps the search; the dead tab finds the job, the queued one does not.
    tabs = re.search(r'<nav class="tabs" id="state-tabs"[^>]*>(.*?)</nav>', page.text, re.S)
    assert tabs is not None
    links = [html.unescape(h) for h in re.findall(r'href="([^"]+)"', tabs[1])]
    assert all(parse_qs(urlsplit(h).query)["error"] == [EVIL] for h in links), links
    queued = next(h for h in links if "state=queued" in h)
    assert rows(web.get(queued)) == []
    assert rows(web.get(next(h for h in links if "state=dead" in h))) == [str(evil.id)]

    payload = web.get("/jobs", params={"payload": '{"customer": 42, "tags": ["<b>"]}'})
    assert rows(payload) == [str(evil.id)]
    assert rows(web.get("/jobs", params={"payload": '{"customer": 7}', "error": "TIME"})) == [
        str(other.id)
    ]
    api = web.get("/api/jobs", params={"payload": '{"customer": 42}', "state": "dead"}).json()
    assert [j["id"] for j in api["jobs"]] == [str(evil.id)] and api["scan_cut"] is False


def test_a_payload_that_is_not_json_is_a_400_naming_what_is_wrong(web: httpx.Client) -> None:
    page = web.get("/jobs", params={"payload": "{customer: 42}"})
    assert page.status_code == 400
    message = 'payload must be JSON, such as {"customer": 42}: Expecting property name'
    assert message in html.unescape(page.text)
    api = web.get("/api/jobs", params={"payload": '{"a": 1'})
    assert api.status_code == 400
    assert api.json()["error"].startswith('payload must be JSON, such as {"customer": 42}: ')


def test_a_search_stops_at_its_bound_says_so_and_searches_further(
    db_url: str, web: httpx.Client
) -> None:
    async def setup(client: Client) -> list[Job]:
        return [
            await client.store.enqueue(NewJob(type="t", payload={"n": n, "hit": n in (0, 4)}))
            for n in range(7)
        ]

    jobs = with_client(db_url, setup)
    first = web.get("/jobs", params={"payload": '{"hit": true}'})
    # Jobs 6, 5, 4 examined: job 4 found, and the page says the search stopped.
    assert rows(first) == [str(jobs[4].id)]
    cut = re.search(r'<p class="note" id="search-cut">(.*?)</p>', first.text, re.S)
    assert cut is not None, first.text
    assert "Searched the newest 3 jobs and found 1; older jobs were not searched." in cut[1]
    assert 'id="next-page"' not in first.text
    further = re.search(r'id="search-further" href="([^"]+)"', cut[1])
    assert further is not None
    second = web.get(html.unescape(further[1]))
    # Jobs 3, 2, 1: nothing, and still cut; then job 0, and the end.
    assert rows(second) == [] and "Searched the next 3 jobs and found 0" in second.text
    third_link = re.search(r'id="search-further" href="([^"]+)"', second.text)
    assert third_link is not None
    third = web.get(html.unescape(third_link[1]))
    assert rows(third) == [str(jobs[0].id)] and 'id="search-cut"' not in third.text

    api = web.get("/api/jobs", params={"payload": '{"hit": true}'}).json()
    assert api["scan_cut"] is True and api["search_rows"] == 3
    assert api["next_cursor"] == str(jobs[4].id) and len(api["jobs"]) == 1
    more = web.get("/api/jobs", params={"payload": '{"hit": true}', "cursor": api["next_cursor"]})
    assert more.json()["jobs"] == [] and more.json()["next_cursor"] == str(jobs[1].id)
    # Without a search the listing is a plain listing: no bound, no flag.
    plain = web.get("/api/jobs").json()
    assert len(plain["jobs"]) == 7 and plain["scan_cut"] is False and "search_rows" not in plain


def test_bulk_actions_by_filter_refuse_a_search_and_change_nothing(
    db_url: str, web: httpx.Client
) -> None:
    dead = with_client(db_url, lambda c: failed(c, "boom", {"customer": 42}))
    page = web.get("/jobs", params={"error": "boom"})
    assert rows(page) == [str(dead.id)]
    # The page does not offer it...
    assert '<option value="filter">' not in page.text
    assert '<option value="filter">' in web.get("/jobs").text
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    # ...and refuses it when posted anyway, from the form or the API.
    form = {"csrf": token[1], "action": "retry", "scope": "filter", "error": "boom"}
    refused = web.post("/jobs/bulk", data=form)
    assert refused.status_code == 400
    assert "a bulk action on a whole filter takes no search" in html.unescape(refused.text)
    csrf = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    for search in ({"error": "boom"}, {"payload": "{}"}, {"id": ""}):
        body = {"action": "retry", "filter": {"state": "dead", **search}}
        answer = web.post("/api/jobs/bulk", json=body, headers=csrf)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"].startswith("a bulk action on a whole filter takes no search")
    assert web.get(f"/api/jobs/{dead.id}").json()["job"]["state"] == "dead"
    # The selection still works on what the search showed.
    selected = {
        **{"csrf": token[1], "action": "retry", "scope": "selected", "ids": str(dead.id)},
        **{"error": "boom & <more>", "payload": "{}"},  # the page's search, sent along
    }
    done = web.post("/jobs/bulk", data=selected, follow_redirects=False)
    # Back to the listing of the same search.
    assert done.status_code == 303
    assert parse_qs(urlsplit(done.headers["location"]).query) == {
        "error": ["boom & <more>"],
        "payload": ["{}"],
    }
    assert web.get(f"/api/jobs/{dead.id}").json()["job"]["state"] == "queued"
