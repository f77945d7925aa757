"""jobrun.integrations.flask: a Flask app's client and the request's transaction, on PostgreSQL.

Routes run through Flask's test client (a real WSGI call) on an app with
Flask-SQLAlchemy on the psycopg driver, bound to the test database: the job
goes in with the request's rows, or with neither. One test serves the app
with ``flask run`` on a free port and sends it real HTTP requests.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from flask import Flask, abort
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import text
from tests.acceptance.web_site import free_port

from jobrun import Client, ConfigurationError, JobContext, NewJob, Registry, SyncClient
from jobrun.integrations.flask import Jobrun
from jobrun.testing import eventually_sync

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _rows(db_url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(query).fetchall()


def _jobs(db_url: str) -> list[tuple[Any, ...]]:
    return _rows(db_url, "SELECT payload->>'user_id', state::text FROM jobs ORDER BY created_at")


def _users(db_url: str) -> list[tuple[Any, ...]]:
    return _rows(db_url, "SELECT id, welcomed FROM users ORDER BY id")


@pytest.fixture
def users(db_url: str) -> str:
    """``db_url`` with a users table, as the app's own data."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int PRIMARY KEY, welcomed bool NOT NULL)")
    return db_url


def _registry(runs: list[int]) -> Registry:
    registry = Registry()

    @registry.handler("welcome")
    async def welcome(ctx: JobContext, payload: Any) -> Any:
        runs.append(payload["user_id"])

        async def commit(conn: Any) -> None:
            await conn.execute(
                "UPDATE users SET welcomed = true WHERE id = %s", (payload["user_id"],)
            )

        return commit

    return registry


def _app(db_url: str, jobs: Jobrun, *, with_db: bool = True) -> Flask:
    """An app writing users and enqueueing their welcome, with or without Flask-SQLAlchemy."""
    app = Flask("signup")
    app.config["JOBRUN_DATABASE_URL"] = db_url
    db = SQLAlchemy() if with_db else None
    if db is not None:
        app.config["SQLALCHEMY_DATABASE_URI"] = "postgresql+psycopg://"
        app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {"creator": lambda: psycopg.connect(db_url)}
        db.init_app(app)
    jobs.init_app(app)

    @app.post("/signup/<int(signed=True):user_id>")
    def signup(user_id: int) -> dict[str, Any]:
        if db is not None:
            db.session.execute(text("INSERT INTO users VALUES (:id, false)"), {"id": user_id})
        job = jobs.enqueue(NewJob(type="welcome", payload={"user_id": user_id}))
        if user_id < 0:
            abort(500)  # the request fails after the enqueue
        if db is not None:
            db.session.commit()
        return {"job": str(job.id)}

    @app.post("/nested/<int(signed=True):user_id>")
    def nested(user_id: int) -> dict[str, Any]:
        assert db is not None
        db.session.execute(text("INSERT INTO users VALUES (:id, false)"), {"id": user_id})
        savepoint = db.session.begin_nested()
        jobs.enqueue(NewJob(type="welcome", payload={"user_id": -user_id}))
        savepoint.rollback()  # takes the job enqueued since the savepoint, and only it
        jobs.enqueue(NewJob(type="welcome", payload={"user_id": user_id}))
        db.session.commit()
        return {}

    return app


async def test_a_committed_request_publishes_its_job_and_a_worker_runs_it_once(
    users: str,
) -> None:
    runs: list[int] = []
    registry = _registry(runs)
    app = _app(users, Jobrun(registry))
    answer = app.test_client().post("/signup/7")
    assert answer.status_code == 200, answer.text
    assert _jobs(users) == [("7", "queued")]
    async with Client(registry, database_url=users) as client:
        await client.run_worker(drain=True)
    assert runs == [7]
    assert _users(users) == [(7, True)]
    assert _jobs(users) == [("7", "succeeded")]


def test_a_failed_request_rolls_back_its_job_with_its_rows(users: str) -> None:
    app = _app(users, Jobrun())
    http = app.test_client()
    assert http.post("/signup/-3").status_code == 500
    assert http.post("/signup/4").status_code == 200  # the same pool, the next request
    assert _users(users) == [(4, False)]
    assert _jobs(users) == [("4", "queued")]


def test_a_rolled_back_savepoint_takes_only_the_job_enqueued_after_it(users: str) -> None:
    app = _app(users, Jobrun())
    assert app.test_client().post("/nested/5").status_code == 200
    assert _users(users) == [(5, False)]
    assert _jobs(users) == [("5", "queued")]


def test_an_app_without_flask_sqlalchemy_enqueues_in_its_own_transaction(db_url: str) -> None:
    jobs = Jobrun()
    app = _app(db_url, jobs, with_db=False)
    # The request fails after the enqueue: its job was committed on its own already.
    assert app.test_client().post("/signup/-8").status_code == 500
    assert _jobs(db_url) == [("-8", "queued")]
    with app.app_context():
        assert jobs.conn() is None


def test_join_session_off_enqueues_apart_from_the_session(users: str) -> None:
    app = _app(users, Jobrun(join_session=False))
    assert app.test_client().post("/signup/-9").status_code == 500
    assert _users(users) == []  # the request's rows rolled back
    assert _jobs(users) == [("-9", "queued")]  # the job did not


def _connections(db_url: str) -> int:
    """Other sessions on ``db_url``'s database: the app's pool, here."""
    [(count,)] = _rows(
        db_url,
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    return int(count)


def test_the_client_lives_across_requests_and_closes_when_the_app_goes(db_url: str) -> None:
    jobs = Jobrun()
    app = _app(db_url, jobs, with_db=False)
    http = app.test_client()
    with app.app_context():
        client = jobs.client
    assert isinstance(client, SyncClient)
    assert http.post("/signup/1").status_code == 200
    assert http.post("/signup/2").status_code == 200  # no teardown closed it in between
    with app.app_context():
        assert jobs.client is client
    assert client.store is not None
    assert _connections(db_url) >= 1

    del app, http
    gc.collect()  # the app is gone: its client closes
    with pytest.raises(ConfigurationError, match="not open"):
        client.store  # noqa: B018
    eventually_sync(lambda: _connections(db_url) == 0, what="the pool's connections closed")


def test_close_closes_the_apps_client_now(db_url: str) -> None:
    jobs = Jobrun()
    app = _app(db_url, jobs, with_db=False)
    with app.app_context():
        client = jobs.client
        jobs.close()
        with pytest.raises(ConfigurationError, match="not open"):
            client.store  # noqa: B018


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"JOBRUN_DATABSE_URL": "postgresql://x"}, "'JOBRUN_DATABSE_URL'.* not a jobrun setting"),
        ({"JOBRUN_CONCURRENCY": "lots"}, "Flask app 'bad'.*concurrency"),
        ({"JOBRUN_LEASE": "soon"}, "Flask app 'bad'.*lease"),
    ],
)
def test_a_bad_jobrun_key_fails_init_app_with_one_clear_error(
    config: dict[str, Any], message: str
) -> None:
    app = Flask("bad")
    app.config.update(config)
    with pytest.raises(ConfigurationError, match=message):
        Jobrun().init_app(app)
    assert "jobrun" not in app.extensions


def test_misuses_are_named(db_url: str) -> None:
    app = Flask("plain")
    with app.app_context(), pytest.raises(ConfigurationError, match="not initialised"):
        Jobrun().client  # noqa: B018
    jobs = Jobrun(app=app)
    with pytest.raises(ConfigurationError, match="already initialised"):
        jobs.init_app(app)
    with pytest.raises(ConfigurationError, match=r"first argument is a jobrun\.Registry"):
        Jobrun(app)  # type: ignore[arg-type]


def test_flask_sqlalchemy_on_another_driver_is_refused_before_writing(db_url: str) -> None:
    app = Flask("sqlite")
    app.config["SQLALCHEMY_DATABASE_URI"] = "sqlite://"
    app.config["JOBRUN_DATABASE_URL"] = db_url
    SQLAlchemy(app)
    jobs = Jobrun(app=app)
    with app.app_context(), pytest.raises(ConfigurationError, match="pysqlite driver"):
        jobs.enqueue(NewJob(type="welcome"))
    assert _jobs(db_url) == []


def test_importing_jobrun_does_not_import_flask() -> None:
    code = "import sys, jobrun, jobrun.integrations; assert 'flask' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.fixture
def served(users: str) -> Iterator[str]:
    """tests/integration/flask_app.py under ``flask run`` on a free port; its base URL."""
    port = free_port()
    env = {**os.environ, "FLASK_JOBRUN_DATABASE_URL": users}
    env.pop("JOBRUN_DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", f"{HERE / 'flask_app.py'}:create_app()",
         "run", "--port", str(port), "--no-reload", "--no-debugger"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        try:
            httpx.get(url + "/", timeout=1)
        except httpx.TransportError:
            assert proc.poll() is None, proc.communicate()[0]
            return False
        return True

    try:
        eventually_sync(serving, what="flask run serving")
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_a_served_app_enqueues_over_a_real_socket(served: str, users: str) -> None:
    assert httpx.post(served + "/signup/11").status_code == 200
    assert httpx.post(served + "/signup/-12").status_code == 500
    eventually_sync(lambda: _jobs(users) == [("11", "queued")], what="the committed job")
    assert _users(users) == [(11, False)]
