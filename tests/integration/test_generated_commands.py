"""Every command kind of the generator's golden output, run on a real server.

The golden fixture (tests/unit/golden) is applied to a fresh empty database and
its generated package (tests/unit/golden/expected) is imported under a private
name, then each method runs through ``AsyncQuerier`` and ``Querier``. The
checks are about the generated code: values arrive with the declared Python
types, placeholders and ``%`` survive the driver, and the bulk commands make
one round trip of many parameter sets.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "unit" / "golden"
PACKAGE = "golden_widgets_generated"


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, ...]]:
    root = tmp_path_factory.mktemp("golden")
    shutil.copytree(GOLDEN / "expected", root / PACKAGE)
    sys.path.insert(0, str(root))
    try:
        models = importlib.import_module(f"{PACKAGE}.models")
        widgets = importlib.import_module(f"{PACKAGE}.widgets")
        notes = importlib.import_module(f"{PACKAGE}.widget_notes")
        yield models, widgets, notes
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.startswith(PACKAGE)]:
            del sys.modules[name]


def schema_up() -> str:
    text = (GOLDEN / "schema" / "00001_widgets.sql").read_text()
    return text.split("-- +goose Up", 1)[1].split("-- +goose Down", 1)[0]


def copy_rows(models: ModuleType, widgets: ModuleType, n: int) -> Iterator[Any]:
    at = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    for i in range(n):
        yield widgets.WidgetCopyParams(
            uid=uuid4(),
            name=f"copied-{i}",
            label=None if i % 2 else "50% off",
            small=i % 100,
            medium=i,
            price=Decimal("9.99"),
            ratio=0.5,
            active=i % 3 == 0,
            blob=b"\x00\x01",
            doc={"i": i, "pct": "50%"},
            at=at,
            day=date(2024, 5, 1),
            span=timedelta(minutes=5),
            tags=["a", "b"],
            mood=models.Mood.SO_SO,
        )


async def test_every_command_async(empty_db_url: str, gen: tuple[ModuleType, ...]) -> None:
    models, widgets, notes = gen
    async with await psycopg.AsyncConnection.connect(empty_db_url) as conn:
        await conn.execute(schema_up())
        q = widgets.AsyncQuerier(conn)
        nq = notes.AsyncQuerier(conn)
        assert q.conn is conn

        # :one, RETURNING * → the table model, every type as declared
        uid = uuid4()
        w = await q.widget_create(
            params=widgets.WidgetCreateParams(
                uid=uid,
                name="alpha",
                label=None,
                doc={"k": ["v", 1, None], "pct": "100%"},
                raw=None,
                tags=["x", "y"],
                scores=[1, 2**40],
                mood=models.Mood.SAD,
                maybe_mood=None,
                span=timedelta(hours=1, seconds=3),
                price=Decimal("12.50"),
            )
        )
        assert isinstance(w, models.Widget)
        assert w.uid == uid and w.name == "alpha" and w.label is None
        assert w.doc == {"k": ["v", 1, None], "pct": "100%"} and w.raw is None
        assert w.tags == ["x", "y"] and w.scores == [1, 2**40]
        assert w.mood is models.Mood.SAD and w.maybe_mood is None
        assert w.span == timedelta(hours=1, seconds=3) and w.price == Decimal("12.50")
        assert w.at.tzinfo is not None and w.active is True and w.small == 0
        # Built without validation, yet equal to a validated model.
        assert models.Widget.model_validate(w.model_dump()) == w
        assert w.model_fields_set == set(models.Widget.model_fields)

        got = await q.widget_get(id=w.id)
        assert got == w
        assert await q.widget_get(id=w.id + 1000) is None

        # :many with an enum array param, a narg, a repeated param
        w2 = await q.widget_create(
            params=widgets.WidgetCreateParams(
                uid=uuid4(),
                name="beta",
                label="alpha",
                doc=[],
                raw={"raw": True},
                tags=[],
                scores=None,
                mood=models.Mood.HAPPY,
                maybe_mood=models.Mood.SO_SO,
                span=None,
                price=Decimal(0),
            )
        )
        assert w2 is not None and w2.raw == {"raw": True} and w2.maybe_mood is models.Mood.SO_SO
        listed = await q.widget_list(
            moods=[models.Mood.SAD, models.Mood.HAPPY], now=None, name="alpha"
        )
        assert [x.id for x in listed] == [w.id, w2.id]
        past = datetime(2000, 1, 1, tzinfo=UTC)
        assert await q.widget_list(moods=[models.Mood.SAD], now=past, name="alpha") == []
        # four parameters: keyword arguments still
        found = await q.widget_find(
            prefix="al", mood=models.Mood.SAD, min_price=Decimal(10), max_price=Decimal(20)
        )
        assert [(f.id, f.name) for f in found] == [(w.id, "alpha")]

        # :many → per-query row model; '%' literals reach the server intact
        summary = await q.widget_summary(pattern="lph")
        assert len(summary) == 1
        assert isinstance(summary[0], widgets.WidgetSummaryRow)
        assert (summary[0].name, summary[0].pct, summary[0].tags) == ("alpha", "50%", ["x", "y"])

        # :one scalar, :many scalar over a slice
        now = await q.widget_now()
        assert isinstance(now, datetime) and now.tzinfo is not None
        assert await q.widget_ids(ids=[w2.id, w.id, 999]) == [w.id, w2.id]

        # :execrows with '$1' in a literal, :exec with '%' in a literal
        assert await q.widget_rename(name="gamma", id=w.id) == 1
        assert await q.widget_rename(name="gamma", id=999) == 0
        assert await q.widget_touch(id=w.id) is None
        touched = await q.widget_get(id=w.id)
        assert touched is not None and touched.name == "gamma" and touched.label == "touched 100%"

        # :copyfrom
        assert await q.widget_copy(rows=copy_rows(models, widgets, 3)) == 3
        assert await q.widget_copy(rows=[]) == 0
        copied = await q.widget_summary(pattern="copied-")
        assert [c.name for c in copied] == ["copied-0", "copied-1", "copied-2"]
        first = await q.widget_get(id=copied[0].id)
        assert first is not None
        assert first.label == "50% off" and first.doc == {"i": 0, "pct": "50%"}
        assert first.mood is models.Mood.SO_SO and first.blob == b"\x00\x01"

        # :batchexec, :batchone (table model and scalar), :batchmany
        await q.widget_set_doc(
            rows=[
                widgets.WidgetSetDocParams(doc={"n": 1}, raw=None, id=w.id),
                widgets.WidgetSetDocParams(doc={"n": 2}, raw=[1], id=w2.id),
            ]
        )
        got_many = await q.widget_batch_get(
            rows=[widgets.WidgetBatchGetParams(id=i) for i in (w.id, 999, w2.id)]
        )
        assert [g.doc if g else None for g in got_many] == [{"n": 1}, None, {"n": 2}]
        assert got_many[2] is not None and got_many[2].raw == [1]
        assert await q.widget_batch_get(rows=[]) == []
        moods = await q.widget_batch_moods(
            rows=[widgets.WidgetBatchMoodsParams(id=i) for i in (w2.id, 999)]
        )
        assert moods == [models.Mood.HAPPY, None] and moods[0] is models.Mood.HAPPY

        first_note = await nq.note_add(widget_id=w.id, body="one")
        await nq.note_add(widget_id=w.id, body="two")
        assert isinstance(first_note, int)
        assert await nq.note_count() == 2
        per_widget = await nq.notes_for(
            rows=[notes.NotesForParams(widget_id=i) for i in (w.id, w2.id)]
        )
        assert [[n.body for n in group] for group in per_widget] == [["one", "two"], []]
        assert isinstance(per_widget[0][0], models.WidgetNote)

        times = await nq.note_times(id=w.id)
        assert isinstance(times, notes.NoteTimesRow)
        assert times.local_at is None and times.clock is None and times.small == 0


def test_every_command_sync(empty_db_url: str, gen: tuple[ModuleType, ...]) -> None:
    models, widgets, notes = gen
    with psycopg.connect(empty_db_url) as conn:
        conn.execute(schema_up())
        conn.execute(
            "INSERT INTO widgets (uid, name, local_at, day, clock, ratio4, medium)"
            " VALUES (%s, 'seed', '2024-01-02 03:04:05', '2024-01-02', '10:11:12', 1.5, 7)",
            (uuid4(),),
        )
        q = widgets.Querier(conn)
        nq = notes.Querier(conn)
        seed = q.widget_ids(ids=[1])
        assert seed == [1]
        times = nq.note_times(id=1)
        assert times is not None
        assert times.local_at == datetime(2024, 1, 2, 3, 4, 5) and times.local_at.tzinfo is None
        assert times.day == date(2024, 1, 2) and times.clock == dtime(10, 11, 12)
        assert times.ratio4 == 1.5 and times.medium == 7

        w = q.widget_create(
            params=widgets.WidgetCreateParams(
                uid=uuid4(),
                name="sync",
                label="l",
                doc={"a": 1},
                raw=None,
                tags=["t"],
                scores=None,
                mood=models.Mood.HAPPY,
                maybe_mood=models.Mood.SAD,
                span=None,
                price=Decimal("1.5"),
            )
        )
        assert w is not None and w.maybe_mood is models.Mood.SAD
        assert q.widget_get(id=w.id) == w
        assert [x.id for x in q.widget_list(moods=[models.Mood.HAPPY], now=None, name="sync")] == [
            w.id
        ]
        assert [s.pct for s in q.widget_summary(pattern="yn")] == ["50%"]
        assert isinstance(q.widget_now(), datetime)
        assert q.widget_rename(name="sync2", id=w.id) == 1
        q.widget_touch(id=w.id)
        assert q.widget_copy(rows=copy_rows(models, widgets, 5)) == 5
        q.widget_set_doc(rows=iter([widgets.WidgetSetDocParams(doc=None, raw=None, id=w.id)]))
        got = q.widget_batch_get(rows=[widgets.WidgetBatchGetParams(id=w.id)])
        assert got[0] is not None and got[0].doc is None and got[0].label == "touched 100%"
        assert q.widget_batch_moods(rows=[widgets.WidgetBatchMoodsParams(id=w.id)]) == [
            models.Mood.HAPPY
        ]
        assert nq.note_add(widget_id=w.id, body="n") is not None
        assert nq.note_count() == 1
        assert [len(g) for g in nq.notes_for(rows=[notes.NotesForParams(widget_id=w.id)])] == [1]
        conn.rollback()


async def test_copyfrom_streams_100k_rows(empty_db_url: str, gen: tuple[ModuleType, ...]) -> None:
    models, widgets, _ = gen
    n = 100_000
    async with await psycopg.AsyncConnection.connect(empty_db_url) as conn:
        await conn.execute(schema_up())
        await conn.commit()
        q = widgets.AsyncQuerier(conn)
        # A generator, so the rows are never all in memory at once.
        copied = await q.widget_copy(rows=copy_rows(models, widgets, n))
        await conn.commit()
        cur = await conn.execute("SELECT count(*) FROM widgets")
        assert copied == n and await cur.fetchone() == (n,)


def test_row_construction_matches_validation(
    empty_db_url: str, gen: tuple[ModuleType, ...]
) -> None:
    models, _, _ = gen
    with psycopg.connect(empty_db_url) as conn:
        conn.execute(schema_up())
        conn.execute(
            "INSERT INTO widgets (uid, name, scores, maybe_mood) VALUES (%s, 'r', '{1}', 'sad')",
            (uuid4(),),
        )
        row = conn.execute("SELECT * FROM widgets").fetchone()
    assert row is not None
    names = list(models.Widget.model_fields)
    fast = models.row_to_widget(row)
    assert fast == models.Widget.model_validate(dict(zip(names, row, strict=True)))
    assert isinstance(fast.uid, UUID)


async def test_execrows_counts_rows_inside_a_pipeline_as_in_a_commit_callback(db_url: str) -> None:
    # jobrun runs commit callbacks in pipeline mode, where a cursor's rowcount
    # is unknown until a sync; the generated :execrows method must still count.
    from jobrun.sqlc import events as event_queries

    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        await conn.execute(
            "INSERT INTO job_events (job_id, at, kind, to_state) "
            "SELECT gen_random_uuid(), now() - interval '2 days', 'enqueued', 'queued' "
            "FROM generate_series(1, 3)"
        )
        await conn.commit()
        async with conn.transaction(), conn.pipeline():
            deleted = await event_queries.AsyncQuerier(conn).event_prune(
                older_than=timedelta(days=1), batch_size=10, now=None
            )
        assert deleted == 3
