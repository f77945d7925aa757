"""``jobrun web`` over a real socket, driven as a browser would drive its pages, and by hand.

The dashboard runs as the real command (a subprocess on a free port); the
client resolves every form action against the page's URL the way a browser
does (dot segments removed), then posts it with the page's CSRF token. That
is how a queue named ``../queues/victim`` used to pause ``victim``.
"""

from __future__ import annotations

import asyncio
import html
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun import Client
from jobrun.domain import NewJob, NewSchedule, Outcome, OutcomeKind, QueueInfo, Schedule

EVIL = "../queues/victim"
EVIL_SCHEDULE = "../schedules/victim"


def with_client(db_url: str, body: Callable[[Client], Any]) -> Any:
    async def run() -> Any:
        async with Client(database_url=db_url) as client:
            return await body(client)

    return asyncio.run(run())


@pytest.fixture
def site(db_url: str) -> Iterator[str]:
    proc, url = serve(db_url)
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture
def web(site: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=site, auth=(USER, PASSWORD), timeout=10) as opened:
        yield opened


def forms(page: httpx.Response, row: str, value: str) -> list[str]:
    """The action attributes of the forms in the table row whose ``row`` attribute is ``value``."""
    found = re.search(rf'<tr {row}="{re.escape(html.escape(value))}">(.*?)</tr>', page.text, re.S)
    assert found is not None, (value, page.text)
    return [html.unescape(a) for a in re.findall(r'<form[^>]* action="([^"]*)"', found[1])]


def submit(web: httpx.Client, page: httpx.Response, to: str, **fields: str) -> httpx.Response:
    """Post a form as a browser does: its action ``to`` resolved against the page URL, its token."""
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    target = page.url.join(to)  # RFC 3986 resolution: "/a/../b" becomes "/b"
    return web.post(str(target), data={"csrf": token[1], **fields})


def queues(db_url: str) -> dict[str, QueueInfo]:
    listed = with_client(db_url, lambda c: c.store.list_queues())
    return {q.name: q for q in listed}


def schedules(db_url: str) -> dict[str, Schedule]:
    listed = with_client(db_url, lambda c: c.store.list_schedules())
    return {s.name: s for s in listed}


def test_a_queue_named_like_a_path_is_the_only_one_its_buttons_change(
    db_url: str, web: httpx.Client
) -> None:
    async def setup(client: Client) -> None:
        for queue in ("victim", EVIL, "billing/eu", "billing", "eu"):
            await client.store.enqueue(NewJob(type="t", queue=queue))

    with_client(db_url, setup)
    page = web.get("/queues")
    assert page.status_code == 200
    pause, limits, clear_queued, drain, clear_jobs = forms(page, "data-queue", EVIL)
    # Every character of the name that is not unreserved is encoded: "/" too.
    assert pause == "/queues/..%2Fqueues%2Fvictim/pause"
    assert limits == "/queues/..%2Fqueues%2Fvictim/limits"
    # Clearing goes through the confirmed bulk delete, the name a form field.
    assert clear_queued == "/jobs/bulk"
    assert f'name="queue" value="{html.escape(EVIL)}"' in page.text
    assert forms(page, "data-queue", "billing/eu")[0] == "/queues/billing%2Feu/pause"

    assert submit(web, page, pause).status_code == 303
    assert submit(web, page, limits, concurrency="3").status_code == 303
    after = queues(db_url)
    assert after[EVIL].paused and after[EVIL].concurrency_limit == 3
    assert not after["victim"].paused and after["victim"].concurrency_limit is None

    assert drain == "/queues/..%2Fqueues%2Fvictim/drain"
    assert clear_jobs == "/queues/..%2Fqueues%2Fvictim/clear"

    page = web.get("/queues")
    resume, _, _, clear, _ = forms(page, "data-queue", EVIL)
    assert clear == "/queues/..%2Fqueues%2Fvictim/clear-limits"
    with_client(db_url, lambda c: c.store.set_queue_limits("victim", concurrency=7))
    assert submit(web, page, clear).status_code == 303
    assert submit(web, page, resume).status_code == 303
    after = queues(db_url)
    assert not after[EVIL].paused and after[EVIL].concurrency_limit is None
    assert after["victim"].concurrency_limit == 7

    page = web.get("/queues")
    pause, limits, _, _, _ = forms(page, "data-queue", "billing/eu")
    assert submit(web, page, pause).status_code == 303
    assert submit(web, page, limits, rate="5", rate_seconds="60").status_code == 303
    after = queues(db_url)
    assert after["billing/eu"].paused and after["billing/eu"].rate_limit == 5
    for other in ("billing", "eu", "victim"):
        assert not after[other].paused and after[other].rate_limit is None


def test_the_api_takes_a_percent_encoded_queue_name_with_a_slash(
    db_url: str, web: httpx.Client
) -> None:
    with_client(db_url, lambda c: c.store.enqueue(NewJob(type="t", queue="billing")))
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    paused = web.post("/api/queues/billing%2Feu/pause", headers=h)
    assert paused.status_code == 200, paused.text
    assert paused.json()["name"] == "billing/eu" and paused.json()["paused"] is True
    limited = web.post("/api/queues/billing%2Feu/limits", json={"concurrency": 2}, headers=h)
    assert limited.json()["concurrency_limit"] == 2
    assert web.post("/api/queues/billing%2Feu/clear-limits", headers=h).status_code == 200
    assert web.post("/api/queues/..%2Fqueues%2Fvictim/pause", headers=h).status_code == 200
    after = queues(db_url)
    assert after["billing/eu"].paused and after["billing/eu"].concurrency_limit is None
    assert after[EVIL].paused
    assert not after["billing"].paused and "victim" not in after
    # A name the rule refuses is refused by the API too, and nothing is stored.
    refused = web.post("/api/queues/a%2Cb/pause", headers=h)
    assert refused.status_code == 400 and "','" in refused.json()["error"]
    assert "a,b" not in queues(db_url)


def test_a_url_holding_a_nul_or_bytes_that_are_not_utf8_is_refused_with_400_and_changes_nothing(
    db_url: str, web: httpx.Client
) -> None:
    with_client(
        db_url,
        lambda c: c.store.create_schedule(
            NewSchedule(name="tick", type="t", every=timedelta(minutes=5))
        ),
    )
    before_queues, before_schedules = queues(db_url), schedules(db_url)
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    posts = [
        f"/api/schedules/{name}/{verb}"
        for name in ("%00", "a%00b")
        for verb in ("pause", "resume", "run-now", "delete")
    ]
    # %FF is no UTF-8 at all, %C0%AE an overlong ".", %ED%A0%80 a lone surrogate.
    posts += [f"/api/queues/{name}/pause" for name in ("%FF", "%C0%AE%C0%AE", "%ED%A0%80")]
    for path in posts:
        refused = web.post(path, json={}, headers=h)
        assert refused.status_code == 400, (path, refused.status_code, refused.text)
        assert refused.json()["error"].startswith("the URL's path"), (path, refused.text)
    page = web.get("/schedules")
    form = submit(web, page, "/schedules/%00/pause")
    assert form.status_code == 400 and "NUL" in form.text, form.text
    reads = [
        "/api/stats?window=hour&queue=%00",
        "/stats?queue=%00",
        "/api/schedules?after=%00",
        "/schedules?after=%00",
        "/api/jobs?queue=%FF",
    ]
    for path in reads:
        refused = web.get(path)
        assert refused.status_code == 400, (path, refused.status_code, refused.text)
        assert "the URL's query" in refused.text, (path, refused.text)
    assert queues(db_url) == before_queues
    assert schedules(db_url) == before_schedules


def test_a_schedule_named_like_a_path_is_the_only_one_its_button_changes(
    db_url: str, web: httpx.Client
) -> None:
    async def setup(client: Client) -> None:
        for name in ("victim", EVIL_SCHEDULE, "reports/eu"):
            await client.store.create_schedule(
                NewSchedule(name=name, type="t", every=timedelta(hours=1))
            )

    with_client(db_url, setup)
    page = web.get("/schedules")
    pause, _, _, _ = forms(page, "data-name", EVIL_SCHEDULE)
    assert pause == "/schedules/..%2Fschedules%2Fvictim/pause"
    assert submit(web, page, pause).status_code == 303
    pause, _, _, _ = forms(page, "data-name", "reports/eu")
    assert submit(web, page, pause).status_code == 303
    after = schedules(db_url)
    assert after[EVIL_SCHEDULE].paused and after["reports/eu"].paused
    assert not after["victim"].paused
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    resumed = web.post("/api/schedules/reports%2Feu/resume", headers=h)
    assert resumed.status_code == 200 and resumed.json()["paused"] is False


def test_a_queue_stored_before_the_name_rule_still_shows_and_lists(
    db_url: str, web: httpx.Client
) -> None:
    job = with_client(db_url, lambda c: c.store.enqueue(NewJob(type="t", queue="mail")))
    with psycopg.connect(db_url) as conn:  # test fixture SQL: data from before the rule
        conn.execute("UPDATE jobs SET queue = 'mail,default' WHERE id = %s", (job.id,))
        conn.execute("INSERT INTO queues (name, paused) VALUES ('mail,default', true)")
    page = web.get("/queues")
    assert page.status_code == 200
    assert forms(page, "data-queue", "mail,default") == []  # no controls to misuse
    assert "must not contain &#39;,&#39;" in page.text
    overview = web.get("/")
    assert overview.status_code == 200 and "/jobs?queue=mail%2Cdefault" in overview.text
    listed = web.get("/jobs", params={"queue": "mail,default"})
    assert listed.status_code == 200 and str(job.id) in listed.text
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    assert web.post(f"/api/jobs/{job.id}/cancel", headers=h).json()["state"] == "cancelled"


# -- issue 27, item 7: malformed bodies and form fields -----------------------------------


def snapshot(db_url: str) -> list[Any]:
    """Everything an action could change: job states, events, queue and schedule controls."""
    with psycopg.connect(db_url) as conn:  # test fixture SQL
        return [
            conn.execute(
                "SELECT id, state, cancel_requested, attempts FROM jobs ORDER BY id"
            ).fetchall(),
            conn.execute("SELECT count(*) FROM job_events").fetchall(),
            conn.execute(
                "SELECT name, paused, concurrency_limit, rate_limit, rate_interval, changed_by"
                " FROM queues ORDER BY name"
            ).fetchall(),
            conn.execute("SELECT name, paused, changed_by FROM schedules ORDER BY name").fetchall(),
        ]


@pytest.fixture
def targets(db_url: str) -> dict[str, str]:
    """One job, queue and schedule for every action, each in a state the action would change."""

    async def setup(client: Client) -> dict[str, str]:
        store = client.store
        queued = await store.enqueue(NewJob(type="t", queue="mail"))
        await store.enqueue(NewJob(type="t", queue="work", max_attempts=1))
        [claimed] = await store.claim(["work"], "w", 1, timedelta(minutes=1))
        dead = await store.fail(claimed, "w", "boom")
        await store.set_queue_limits("mail", concurrency=2)
        await store.pause_queue("mail")
        await store.create_schedule(NewSchedule(name="nightly", type="t", every=timedelta(hours=1)))
        return {"queued": str(queued.id), "dead": str(dead.id)}

    ids: dict[str, str] = with_client(db_url, setup)
    return ids


def api_actions(targets: dict[str, str]) -> list[str]:
    return [
        "/api/jobs/bulk",
        f"/api/jobs/{targets['queued']}/cancel",
        f"/api/jobs/{targets['dead']}/retry",
        "/api/schedules/nightly/pause",
        "/api/schedules/nightly/resume",
        "/api/queues/mail/pause",
        "/api/queues/mail/resume",
        "/api/queues/mail/limits",
        "/api/queues/mail/clear-limits",
        "/api/queues/mail/drain",
        "/api/queues/mail/clear",
        "/api/schedules/new",
        "/api/schedules/nightly/edit",
        "/api/schedules/nightly/run-now",
        "/api/schedules/nightly/delete",
    ]


MALFORMED_BODIES = {
    "array": "[]",
    "string": '"x"',
    "number": "5",
    "null": "null",
    "ids-number": '{"ids": 5}',
    "not-json": "{",
    "deep-array": "[" * 100_000 + "]" * 100_000,
    "deep-object": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "deep-in-a-field": '{"action": "retry", "ids": ' + "[" * 500 + "]" * 500 + "}",
    "huge-number": '{"concurrency": 1' + "0" * 5000 + "}",
}


def test_every_api_action_refuses_a_malformed_body_with_one_line_and_changes_nothing(
    db_url: str, web: httpx.Client, targets: dict[str, str]
) -> None:
    before = snapshot(db_url)
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"], "Content-Type": "application/json"}
    for path in api_actions(targets):
        for name, body in MALFORMED_BODIES.items():
            response = web.post(path, content=body, headers=h)
            assert response.status_code == 400, (path, name, response.text[:300])
            error = response.json()["error"]
            assert error and "\n" not in error and "Traceback" not in error, (path, name, error)
        too_big = web.post(path, content=b"[" + b" " * (2 << 20) + b"]", headers=h)
        assert too_big.status_code == 413, (path, too_big.text[:300])
        as_form = web.post(path, data={"x": "1"}, headers={"X-CSRF-Token": h["X-CSRF-Token"]})
        assert as_form.status_code == 415, (path, as_form.text[:300])
    assert snapshot(db_url) == before


BAD_BULK_BODIES = [
    ({"action": "retry", "ids": 5}, "ids must be an array"),
    ({"action": "retry", "ids": [5]}, "ids must hold job ids"),
    ({"action": "retry", "ids": ["nope"]}, "'nope' in ids is not a job id"),
    ({"action": "retry", "filter": "dead"}, "filter must be an object"),
    ({"action": "retry", "filter": {"state": ["dead"]}}, "state must be a string"),
    ({"action": "retry", "filter": {"state": "gone"}}, "unknown state 'gone'"),
    ({"action": "retry", "filter": {"after": "soon"}}, "after must be a date"),
    ({"action": "retry", "filter": {"mood": "dead"}}, "unexpected field 'mood'"),
    ({"action": "retry"}, "give ids"),
    ({"action": "retry", "ids": [], "filter": {}}, "give ids"),
    ({"action": 5, "ids": []}, "unknown bulk action a number"),
    ({"action": "explode", "ids": []}, "unknown bulk action 'explode'"),
    ({"action": "delete", "ids": [], "confirm": "x"}, "confirm must be the number of jobs"),
    ({"action": "delete", "ids": [], "confirm": -1}, "confirm must be the number of jobs"),
    ({"action": "retry", "ids": [], "extra": 1}, "unexpected field 'extra'"),
]

BAD_LIMITS = [
    ({"rate": "5", "rate_seconds": "0"}, "rate_seconds must be between 1"),
    ({"rate": "5", "rate_seconds": "-1"}, "rate_seconds must be between 1"),
    ({"rate": "5", "rate_seconds": "1.5"}, "rate_seconds must be a whole number"),
    ({"rate": "5", "rate_seconds": "9" * 40}, "rate_seconds must be between 1"),
    ({"rate_seconds": "60"}, "rate_seconds needs a rate"),
    ({"rate": "0"}, "rate must be between 1"),
    ({"rate": "1e3"}, "rate must be a whole number"),
    ({"concurrency": "0"}, "concurrency must be between 1"),
    ({"concurrency": "-3"}, "concurrency must be between 1"),
    ({"concurrency": "2.5"}, "concurrency must be a whole number"),
    ({"concurrency": "abc"}, "concurrency must be a whole number"),
    ({"concurrency": "99999999999"}, "concurrency must be between 1 and 2147483647"),
    ({"concurrency": ""}, "give a concurrency limit, a rate, or both"),
]

BAD_LIMITS_JSON = [
    ({k: int(v) if v.lstrip("-").isdigit() else v for k, v in fields.items()}, needle)
    for fields, needle in BAD_LIMITS
] + [
    ({"concurrency": 2.5}, "concurrency must be a whole number, not a number"),
    ({"concurrency": True}, "concurrency must be a whole number, not a boolean"),
    ({"concurrency": [3]}, "concurrency must be a whole number, not an array"),
    ({"rate": 5, "rate_seconds": 0}, "rate_seconds must be between 1"),
    ({"concurrency": 3, "paused": True}, "unexpected field 'paused'"),
]


def test_api_bodies_of_the_wrong_shape_are_refused_naming_the_field(
    db_url: str, web: httpx.Client, targets: dict[str, str]
) -> None:
    before = snapshot(db_url)
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    for path, cases in (
        ("/api/jobs/bulk", BAD_BULK_BODIES),
        ("/api/queues/mail/limits", BAD_LIMITS_JSON),
    ):
        for body, needle in cases:
            response = web.post(path, json=body, headers=h)
            assert response.status_code == 400, (path, body, response.text)
            assert needle in response.json()["error"], (path, body, response.text)
    assert snapshot(db_url) == before


def test_page_forms_refuse_numbers_and_ids_they_cannot_use_as_given(
    db_url: str, web: httpx.Client, targets: dict[str, str]
) -> None:
    before = snapshot(db_url)
    page = web.get("/queues")
    limits = next(a for a in forms(page, "data-queue", "mail") if a.endswith("/limits"))
    for fields, needle in BAD_LIMITS:
        response = submit(web, page, limits, **fields)
        assert response.status_code == 400, (fields, response.text)
        assert needle in html.unescape(response.text), (fields, response.text)
    page = web.get("/jobs")
    for fields, needle in (
        ({"action": "retry", "scope": "selected", "ids": "not-a-uuid"}, "is not a job id"),
        ({"action": "retry", "scope": "everything"}, "unknown scope 'everything'"),
        ({"action": "purge", "scope": "selected"}, "unknown bulk action 'purge'"),
        ({"action": "retry", "scope": "filter", "state": "gone"}, "unknown state 'gone'"),
    ):
        response = submit(web, page, "/jobs/bulk", **fields)
        assert response.status_code == 400, (fields, response.text)
        assert needle in html.unescape(response.text), (fields, response.text)
    assert snapshot(db_url) == before


# -- issue 27, item 8: job ids in lists ----------------------------------------------------


def test_the_jobs_list_shows_ids_that_differ_with_the_whole_id_in_title_and_copy(
    db_url: str, web: httpx.Client
) -> None:
    jobs = with_client(
        db_url, lambda c: c.store.enqueue_batch([NewJob(type="t") for _ in range(3)])
    )
    ids = [str(job.id) for job in jobs]
    # Ids made within a minute share their first 8 characters (the timestamp).
    assert len({i[:8] for i in ids}) == 1
    page = web.get("/jobs").text
    shown = set()
    for job_id in ids:
        row = re.search(rf'<tr data-id="{job_id}">(.*?)</tr>', page, re.S)
        assert row is not None, page
        # The link shows the id's random tail and holds the whole id in its title.
        assert f'title="{job_id}"><code>…{job_id[-12:]}</code></a>' in row[1]
        assert f'data-copy="{job_id}"' in row[1]
        shown.add(job_id[-12:])
    assert len(shown) == len(ids)


def test_the_jobs_page_has_a_tab_per_state_with_its_count_keeping_the_other_filters(
    db_url: str, web: httpx.Client
) -> None:
    async def setup(client: Client) -> None:
        first = NewJob(type="t", queue="a/b&c", max_attempts=1)
        queued = [NewJob(type="t") for _ in range(3)]
        waits = NewJob(type="t", depends_on=[queued[0].id])
        await client.store.enqueue_batch([first, *queued, waits])
        await client.store.cancel((await client.store.enqueue(NewJob(type="t"))).id)
        (held,) = await client.store.claim(["a/b&c"], "w", 1, timedelta(minutes=5))
        await client.store.record_outcomes("w", [Outcome(job=held, kind=OutcomeKind.FAIL)])

    with_client(db_url, setup)
    page = web.get("/jobs", params={"type": "t"}).text
    tabs = re.search(r'<nav class="tabs" id="state-tabs"[^>]*>(.*?)</nav>', page, re.S)
    assert tabs is not None, page
    counts = dict(re.findall(r'data-state="(\w+)"[^>]*>\w+ <span class="count">([^<]*)<', tabs[1]))
    assert counts == {
        "waiting": "1", "queued": "3", "leased": "0", "succeeded": "≈0", "dead": "1",
        "cancelled": "1",
    }  # fmt: skip
    # Each tab keeps the other filters and sets its state.
    assert 'href="/jobs?type=t&amp;state=dead"' in tabs[1]
    dead = web.get("/jobs", params={"type": "t", "state": "dead"}).text
    assert 'class="on">dead' in dead.replace('data-state="dead" ', "")
    assert dead.count('<tr data-id="') == 1


# -- issue 27, item 9: what the pages leave out ---------------------------------------------

TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/mail.py", line 12, in send
    smtp.send(to)
SMTPError: 550 mailbox unavailable
"""


def test_the_dead_list_overview_and_schedules_show_errors_cancels_and_utc(
    db_url: str, web: httpx.Client
) -> None:
    async def setup(client: Client) -> str:
        store = client.store
        await store.enqueue(NewJob(type="send", queue="mail", max_attempts=1))
        [claimed] = await store.claim(["mail"], "w", 1, timedelta(minutes=1))
        dead = await store.fail(claimed, "w", TRACEBACK)
        await store.cancel((await store.enqueue(NewJob(type="send", queue="mail"))).id)
        await store.create_schedule(NewSchedule(name="nightly", type="t", cron="0 3 * * *"))
        return str(dead.id)

    dead_id = with_client(db_url, setup)
    listing = web.get("/jobs", params={"state": "dead"}).text
    assert "<th>Last error</th>" in listing
    row = re.search(rf'<tr data-id="{dead_id}">(.*?)</tr>', listing, re.S)
    assert row is not None
    error = re.search(r'<td class="error">(.*?)</td>', row[1], re.S)
    assert error is not None and error[1] == "SMTPError: 550 mailbox unavailable"

    overview = web.get("/").text
    assert "<th>Cancelled</th>" in overview
    cancelled = re.search(r'<td class="cancelled"><a [^>]*>(\d+)</a></td>', overview)
    assert cancelled is not None and cancelled[1] == "1"
    assert web.get("/api/overview").json()["queues"][0]["cancelled"] == 1

    schedules = web.get("/schedules").text
    assert "<th>Next run</th>" in schedules and "<th>Last run</th>" in schedules
    # Each time says its zone (UTC, in its title) and reads from now: the next run is ahead.
    next_run = re.search(
        r'<td class="next-run"><time datetime="[^"]+Z" title="([^"]+)">([^<]+)<', schedules
    )
    assert next_run is not None and next_run[1].endswith(" UTC") and next_run[2].startswith("in ")


# -- schedules made, edited, run now and deleted; queues drained and cleared ---------------


def test_a_schedule_is_created_edited_run_now_and_deleted_through_its_forms(
    db_url: str, web: httpx.Client
) -> None:
    page = web.get("/schedules")
    made = submit(
        web,
        page,
        "/schedules/new",
        name=EVIL_SCHEDULE,
        type="<b>t</b>",
        every="1h",
        payload='{"to": "a&b"}',
        queue="billing/eu",
        priority="2",
    )
    assert made.status_code == 303, made.text
    with_client(db_url, lambda c: c.store.create_schedule(
        NewSchedule(name="victim", type="t", every=timedelta(hours=1))))  # fmt: skip
    page = web.get("/schedules")
    assert "<b>t</b>" not in page.text and "&lt;b&gt;t&lt;/b&gt;" in page.text
    before = schedules(db_url)
    _, run_now, delete, edit = forms(page, "data-name", EVIL_SCHEDULE)
    assert edit == "/schedules/..%2Fschedules%2Fvictim/edit"
    # The edit form comes filled in: sent back with a new interval, only that changes.
    assert 'value="{&#34;to&#34;: &#34;a&amp;b&#34;}"' in page.text
    edited = submit(
        web,
        page,
        edit,
        type="<b>t</b>",
        every="5m",
        payload='{"to": "a&b"}',
        queue="billing/eu",
        timezone="UTC",
        priority="2",
        max_attempts="25",
    )
    assert edited.status_code == 303, edited.text
    after = schedules(db_url)
    assert after[EVIL_SCHEDULE].every == timedelta(minutes=5)
    assert after[EVIL_SCHEDULE].next_run_at < before[EVIL_SCHEDULE].next_run_at
    assert after[EVIL_SCHEDULE].changed_by == f"{USER} via web"
    assert after[EVIL_SCHEDULE].payload == {"to": "a&b"} and after["victim"] == before["victim"]
    refused = submit(web, page, edit, cron="* * * * *", every="5m")
    assert refused.status_code == 400 and "give cron or every, not both" in refused.text
    refused = submit(web, page, edit, priority="1.5")
    assert refused.status_code == 400 and "priority must be a whole number" in refused.text

    assert submit(web, page, run_now).status_code == 303
    jobs = with_client(db_url, lambda c: c.store.list_jobs(limit=10)).jobs
    assert [(j.queue, j.type) for j in jobs] == [("billing/eu", "<b>t</b>")]
    assert schedules(db_url)[EVIL_SCHEDULE].next_run_at == after[EVIL_SCHEDULE].next_run_at

    asked = submit(web, page, delete)
    assert asked.status_code == 200 and "Delete schedule ../schedules/victim?" in asked.text
    assert set(schedules(db_url)) == {EVIL_SCHEDULE, "victim"}  # asking deleted nothing
    confirm = re.search(r'<form method="post" action="([^"]+)" id="confirm">', asked.text)
    assert confirm is not None and confirm[1] == "/schedules/..%2Fschedules%2Fvictim/delete"
    assert submit(web, asked, confirm[1], confirm=EVIL_SCHEDULE).status_code == 303
    assert set(schedules(db_url)) == {"victim"}


def test_a_queue_is_drained_then_cleared_and_no_other_queue_is_touched(
    db_url: str, web: httpx.Client
) -> None:
    async def setup(client: Client) -> None:
        for queue in ("victim", EVIL, "billing/eu", "billing", "eu", "../x"):
            await client.store.enqueue(NewJob(type="t", queue=queue))
        await client.store.enqueue(NewJob(type="t", queue="billing/eu"))
        await client.store.claim(["billing/eu"], "w", 1, timedelta(minutes=1))

    with_client(db_url, setup)
    page = web.get("/queues")
    *_, drain, clear = forms(page, "data-queue", "billing/eu")
    assert (drain, clear) == ("/queues/billing%2Feu/drain", "/queues/billing%2Feu/clear")
    assert submit(web, page, drain).status_code == 303
    page = web.get("/queues")
    row = re.search(r'<tr data-queue="billing/eu">(.*?)</tr>', page.text, re.S)
    assert row is not None and "draining: 1 running" in row[1]
    asked = submit(web, page, clear)
    assert asked.status_code == 200 and "Clear queue billing/eu: delete 1 job?" in asked.text
    assert "/queues/billing%2Feu/clear" in asked.text
    wrong = submit(web, page, clear, confirm="5")
    assert wrong.status_code == 200 and "delete 1 job?" in wrong.text  # asked again
    assert submit(web, page, clear, confirm="1").status_code == 303
    *_, clear_x = forms(page, "data-queue", "../x")
    assert clear_x == "/queues/..%2Fx/clear"
    assert submit(web, page, clear_x, confirm="1").status_code == 303
    after = queues(db_url)
    assert after["billing/eu"].paused and (
        after["billing/eu"].queued,
        after["billing/eu"].leased,
    ) == (0, 1)
    assert "../x" not in after
    for other in ("victim", EVIL, "billing", "eu"):
        assert after[other].queued == 1 and not after[other].paused, other
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    answer = web.post("/api/queues/eu/clear", headers=h)
    assert answer.status_code == 409 and answer.json()["confirm"] == 1
    assert web.post("/api/queues/eu/clear", json={"confirm": 1}, headers=h).json()["deleted"] == 1
    drained = web.post("/api/queues/billing/drain", headers=h).json()
    assert drained["paused"] is True and drained["drain"] == "drained"


def test_the_schedule_api_reads_fields_as_the_forms_do(db_url: str, web: httpx.Client) -> None:
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    body = {"name": "n", "type": "t", "cron": "0 3 * * *", "payload": {"a": [1]}, "priority": 3}
    made = web.post("/api/schedules/new", json=body, headers=h)
    assert made.status_code == 200 and made.json()["payload"] == {"a": [1]}
    assert web.post("/api/schedules/new", json=body, headers=h).status_code == 400  # taken
    for bad, needle in [
        ({"cron": "* * * * *", "every": "1m"}, "give cron or every, not both"),
        ({"priority": True}, "priority must be a whole number"),
        ({"timezone": "Mars/Base"}, "unknown time zone"),
        ({"queue": "a,b"}, "','"),
        ({"color": "red"}, "unexpected field color"),
        ({}, "give a field to change"),
    ]:
        refused = web.post("/api/schedules/n/edit", json=bad, headers=h)
        assert refused.status_code == 400 and needle in refused.json()["error"], (bad, refused.text)
    edited = web.post("/api/schedules/n/edit", json={"cron": None, "every": "2h"}, headers=h)
    assert edited.status_code == 200 and edited.json()["every"] == "PT2H"
    ran = web.post("/api/schedules/n/run-now", headers=h)
    assert ran.status_code == 200 and ran.json()["payload"] == {"a": [1]}
    assert web.post("/api/schedules/gone/run-now", headers=h).status_code == 404
    asked = web.post("/api/schedules/n/delete", headers=h)
    assert asked.status_code == 409 and asked.json()["confirm"] == "n"
    assert web.post("/api/schedules/n/delete", json={"confirm": "x"}, headers=h).status_code == 409
    assert web.post("/api/schedules/n/delete", json={"confirm": "n"}, headers=h).status_code == 200
    assert schedules(db_url) == {}


def test_read_only_hides_and_refuses_the_schedule_and_queue_actions(db_url: str) -> None:
    async def setup(client: Client) -> None:
        await client.store.create_schedule(
            NewSchedule(name="n", type="t", every=timedelta(hours=1))
        )
        await client.store.enqueue(NewJob(type="t", queue="mail"))

    with_client(db_url, setup)
    before = snapshot(db_url)
    proc, url = serve(db_url, "--read-only")
    try:
        with httpx.Client(base_url=url, auth=(USER, PASSWORD), timeout=10) as web:
            for page in ("/schedules", "/queues"):
                text = web.get(page).text
                for hidden in ("Run now", "Delete…", "New schedule", "Drain", "Clear…", "Edit"):
                    assert hidden not in text, (page, hidden)
            h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
            for path, body in [
                ("/api/schedules/new", {"name": "m", "type": "t", "every": "1m"}),
                ("/api/schedules/n/edit", {"priority": 1}),
                ("/api/schedules/n/run-now", None),
                ("/api/schedules/n/delete", {"confirm": "n"}),
                ("/api/queues/mail/drain", None),
                ("/api/queues/mail/clear", {"confirm": 1}),
            ]:
                answer = web.post(path, json=body, headers=h)
                assert answer.status_code == 403, (path, answer.text)
    finally:
        stop(proc)
    assert snapshot(db_url) == before


def test_the_new_actions_need_the_csrf_token_and_without_auth_name_anonymous(
    db_url: str, web: httpx.Client
) -> None:
    async def setup(client: Client) -> None:
        await client.store.enqueue(NewJob(type="t", queue="mail"))
        await client.store.create_schedule(
            NewSchedule(name="n", type="t", every=timedelta(hours=1))
        )

    with_client(db_url, setup)
    before = snapshot(db_url)
    actions = ["/schedules/new", "/schedules/n/edit", "/schedules/n/run-now",
               "/schedules/n/delete", "/queues/mail/drain", "/queues/mail/clear"]  # fmt: skip
    for path in actions:
        # No token, from a page and from the API; then a wrong one.
        assert web.post(path, data={"confirm": "n"}).status_code == 403, path
        assert web.post("/api" + path, json={}).status_code == 403, path
        wrong = web.post("/api" + path, json={}, headers={"X-CSRF-Token": "x" * 43})
        assert wrong.status_code == 403, path
    assert snapshot(db_url) == before
    assert len(with_client(db_url, lambda c: c.store.list_jobs(limit=5)).jobs) == 1
    proc, url = serve(db_url, auth=False)
    try:
        with httpx.Client(base_url=url, timeout=10) as anonymous:
            h = {"X-CSRF-Token": anonymous.get("/api/csrf").json()["token"]}
            drained = anonymous.post("/api/queues/mail/drain", headers=h)
            assert drained.status_code == 200, drained.text
            made = anonymous.post(
                "/api/schedules/new", json={"name": "m", "type": "t", "every": "1m"}, headers=h
            )
            assert made.status_code == 200, made.text
            edited = anonymous.post("/api/schedules/m/edit", json={"priority": 1}, headers=h)
            assert edited.json()["changed_by"] == "anonymous via web"
    finally:
        stop(proc)
    assert queues(db_url)["mail"].changed_by == "anonymous via web"


def test_schedules_come_in_keyset_pages_on_the_page_and_in_the_api(
    db_url: str, web: httpx.Client
) -> None:
    """250 schedules: the page shows 100 and links to the next 100 after the last name
    (a name with `/` and `&` included whole); the API answers at most its limit."""
    names = [f"s/{i:03d}&x" for i in range(250)]

    async def make(client: Any) -> None:
        for name in names:
            await client.store.create_schedule(
                NewSchedule(name=name, type="t", every=timedelta(hours=1))
            )

    with_client(db_url, make)
    seen: list[str] = []
    path = "/schedules"
    for _ in range(3):
        page = web.get(path)
        assert page.status_code == 200
        rows = re.findall(r'<tr data-name="([^"]+)"', page.text)
        seen += [html.unescape(r) for r in rows]
        found = re.search(r'href="([^"]+)" id="next-schedules"', page.text)
        if found is None:
            break
        path = html.unescape(found[1])
    assert seen == names and len(rows) == 50
    assert path == "/schedules?after=" + quote("s/199&x", safe="")
    first = web.get("/api/schedules", params={"limit": "120"}).json()
    assert [s["name"] for s in first] == names[:120]
    rest = web.get("/api/schedules", params={"after": names[119]}).json()
    assert [s["name"] for s in rest] == names[120:]
    assert len(web.get("/api/schedules").json()) == 250  # within the default limit, 500
    bad = web.get("/api/schedules", params={"limit": "ten"})
    assert bad.status_code == 400 and bad.json() == {
        "error": "limit must be a whole number, not 'ten'"
    }


def test_sigterm_stops_the_dashboard_cleanly_and_a_taken_port_is_one_error(db_url: str) -> None:
    proc, url = serve(db_url)
    port = url.rsplit(":", 1)[1]
    try:
        # The port is taken by the first dashboard: the second says so once and
        # never claims to serve.
        taken = subprocess.run(
            [sys.executable, "-m", "jobrun", "web", "--database-url", db_url, "--port", port],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert taken.returncode == 2, (taken.stdout, taken.stderr)
        assert taken.stderr.strip() == (
            f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
        ), taken.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    # A service manager's stop: uvicorn would re-raise SIGTERM after its
    # shutdown and the process would end with 143, as if killed.
    assert proc.returncode == 0, err
    assert err.strip().splitlines()[-1] == "jobrun web: stopped", err


def test_api_reads_name_the_parameter_or_id_they_cannot_use(web: httpx.Client) -> None:
    for path, field in (("/api/jobs?limit=abc", "limit"), ("/api/schedules?limit=abc", "limit")):
        refused = web.get(path)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == f"{field} must be a whole number, not 'abc'"
    # A page of nothing is refused, not served as a page of one.
    for path in ("/api/jobs", "/api/schedules"):
        for given in ("0", "-1"):
            refused = web.get(f"{path}?limit={given}")
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"] == f"limit must be at least 1, not {given}"
        assert web.get(f"{path}?limit=100000").status_code == 200  # served at the most
    for path in ("/api/jobs/notauuid", "/api/workflows/notauuid"):
        missing = web.get(path)
        assert missing.status_code == 404, missing.text
        assert missing.json()["error"] == "'notauuid' is not a job id (a UUID)"


def test_a_confirmation_for_one_job_speaks_of_one_job(db_url: str, web: httpx.Client) -> None:
    made = with_client(db_url, lambda c: c.store.enqueue(NewJob(type="t", queue="single")))
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    cleared = web.post("/api/queues/single/clear", headers=h, json={})
    assert cleared.status_code == 409, cleared.text
    assert cleared.json()["error"].startswith(
        "clearing queue 'single' deletes 1 job that is not running, with its events,"
    )
    deleted = web.post(
        "/api/jobs/bulk", headers=h, json={"action": "delete", "ids": [str(made.id)]}
    )
    assert deleted.status_code == 409, deleted.text
    assert deleted.json()["error"].startswith("this deletes 1 job with its events and results")


def test_a_schedule_without_a_name_or_type_is_refused_naming_it(
    db_url: str, web: httpx.Client
) -> None:
    h = {"X-CSRF-Token": web.get("/api/csrf").json()["token"]}
    for body, message in (
        ({"name": "s", "type": " ", "every": "5m"}, "type must not be blank"),
        ({"name": "s", "every": "5m"}, "type is required"),
        ({"name": "", "type": "t", "every": "5m"}, "name must not be blank"),
    ):
        refused = web.post("/api/schedules/new", headers=h, json=body)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == message
    assert schedules(db_url) == {}
