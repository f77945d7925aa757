"""A Flask app with Flask-SQLAlchemy and jobrun, served by ``flask run`` in test_flask.py.

Its settings come through Flask's own ``FLASK_*`` variables
(``app.config.from_prefixed_env()``): ``FLASK_JOBRUN_DATABASE_URL`` becomes
``app.config["JOBRUN_DATABASE_URL"]``, which the extension reads.
"""

from __future__ import annotations

from typing import Any

import psycopg
from flask import Flask, abort
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import text

from jobrun import NewJob
from jobrun.integrations.flask import Jobrun

db = SQLAlchemy()
jobs = Jobrun()


def create_app() -> Flask:
    """The app, its database the one jobrun uses (``JOBRUN_DATABASE_URL``)."""
    app = Flask(__name__)
    app.config.from_prefixed_env()
    url = app.config["JOBRUN_DATABASE_URL"]
    app.config["SQLALCHEMY_DATABASE_URI"] = "postgresql+psycopg://"
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {"creator": lambda: psycopg.connect(url)}
    db.init_app(app)
    jobs.init_app(app)

    @app.post("/signup/<int(signed=True):user_id>")
    def signup(user_id: int) -> dict[str, Any]:
        db.session.execute(text("INSERT INTO users VALUES (:id, false)"), {"id": user_id})
        job = jobs.enqueue(NewJob(type="welcome", payload={"user_id": user_id}))
        if user_id < 0:
            abort(500)  # after the enqueue: the request's rollback takes the job too
        db.session.commit()
        return {"job": str(job.id)}

    return app
