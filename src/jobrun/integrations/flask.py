"""A Flask extension holding one :class:`jobrun.SyncClient` per app.

::

    db = SQLAlchemy()                      # optional: Flask-SQLAlchemy
    jobs = Jobrun(registry)

    def create_app():
        app = Flask(__name__)
        app.config["JOBRUN_DATABASE_URL"] = "postgresql://..."
        db.init_app(app)
        jobs.init_app(app)
        return app

    @app.post("/signup")
    def signup():
        db.session.add(User(...))
        jobs.enqueue(registry.new_job("mail.welcome", {...}))  # in db.session's transaction
        db.session.commit()                                   # the row and the job, together

Settings come from the app's ``JOBRUN_*`` keys (``JOBRUN_DATABASE_URL``,
``JOBRUN_NOTIFY_CHANNEL``, ...: ``JOBRUN_`` and a :class:`jobrun.Config`
field in capitals) over a ``config`` given to :meth:`Jobrun.init_app`, over
the process's ``JOBRUN_*`` variables. They are read and checked when the app
is initialised, so a misspelt key or a bad value fails at startup with one
:class:`jobrun.ConfigurationError`. The client opens its pool at first use
(after a pre-forking server's fork, when the app is built before it) and
closes it when the app goes away: at interpreter exit, when the app is
garbage collected, or at :meth:`Jobrun.close` — never at a request's
teardown, so requests share the pool.

When the app uses Flask-SQLAlchemy, :meth:`Jobrun.enqueue` and its siblings
write the job through ``db.session``: the job commits with the request's rows,
and a rollback (the request failing, or a rolled-back
``db.session.begin_nested()``) removes it. That needs the psycopg driver
(``postgresql+psycopg://``) on the same database as jobrun's tables. An app
without Flask-SQLAlchemy (or ``join_session=False``) enqueues in a short
transaction of the client's own; ``conn=`` still takes any holder
:mod:`jobrun.postgres.holders` knows.

Importing :mod:`jobrun` does not import this module or Flask; the extra
``jobrun[flask]`` pins the Flask and Flask-SQLAlchemy versions it is tested with.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Unpack
from uuid import UUID

from flask import Flask, current_app

from jobrun.config import Config
from jobrun.domain import Job, JobOptions, NewJob
from jobrun.errors import ConfigurationError, IdempotencyConflict
from jobrun.registry import Registry, registry_given
from jobrun.sync_client import DEFAULT_POOL_SIZE, SyncClient

__all__ = ["Jobrun", "settings_from"]

EXTENSION_KEY = "jobrun"
"""The name the extension's per-app state goes by in ``app.extensions``."""

PREFIX = "JOBRUN_"
"""The prefix of the app config keys that hold jobrun's settings."""


def settings_from(app_config: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`jobrun.Config` fields set by the ``JOBRUN_*`` keys of ``app_config``.

    A key is ``JOBRUN_`` and a field's name in capitals, or another variable
    name the field answers to (:meth:`jobrun.Config.variable_names`). A
    ``JOBRUN_`` key that names no field raises ConfigurationError naming it:
    a misspelt setting would otherwise be ignored.
    """
    fields = {
        variable: name for name in Config.model_fields for variable in Config.variable_names(name)
    }
    settings: dict[str, Any] = {}
    for key, value in app_config.items():
        if not isinstance(key, str) or not key.startswith(PREFIX):
            continue
        if key not in fields:
            raise ConfigurationError(
                f"app.config[{key!r}] is not a jobrun setting: jobrun's keys are JOBRUN_ "
                "and a jobrun.Config field in capitals (JOBRUN_DATABASE_URL, "
                "JOBRUN_NOTIFY_CHANNEL, ...)"
            )
        settings[fields[key]] = value
    return settings


class _AppClient:
    """One app's client: opened at first use, closed once when the app goes away."""

    def __init__(self, client: SyncClient, *, join_session: bool) -> None:
        self.client = client
        self.join_session = join_session
        self._lock = threading.Lock()
        self._open = False

    def opened(self) -> SyncClient:
        if not self._open:
            with self._lock:
                if not self._open:
                    self.client.open()
                    self._open = True
        return self.client

    def close(self) -> None:
        with self._lock:
            self.client.close()
            self._open = False


class Jobrun:
    """jobrun for Flask apps: one :class:`jobrun.SyncClient` per app, closed with the app.

    ``registry`` gives the payload models and handler defaults of the jobs
    enqueued (see :class:`jobrun.SyncClient`); ``config`` the settings the
    app's ``JOBRUN_*`` keys go over. ``app``, when given, is initialised at
    once; otherwise call :meth:`init_app` (the app factory pattern: one
    extension serves many apps). ``join_session=False`` keeps
    :meth:`enqueue` off Flask-SQLAlchemy's session. ``max_pool_size`` bounds
    each app's pool.
    """

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        app: Flask | None = None,
        config: Config | None = None,
        join_session: bool = True,
        max_pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self.registry = registry_given(registry, "Jobrun")
        """The handlers whose payload models and defaults enqueued jobs take."""
        self._config = config
        self._join_session = join_session
        self._max_pool_size = max_pool_size
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask, *, config: Config | None = None) -> None:
        """Give ``app`` its client, configured by its ``JOBRUN_*`` keys over ``config``.

        ``config`` defaults to the one given to the extension. The settings
        are checked now (ConfigurationError naming the key or the field); the
        pool opens at first use and closes when the app goes away.
        """
        if EXTENSION_KEY in app.extensions:
            raise ConfigurationError(f"jobrun is already initialised on the Flask app {app.name!r}")
        try:
            settings = Config.given(config or self._config, **settings_from(app.config))
        except ConfigurationError as exc:
            raise ConfigurationError(f"Flask app {app.name!r}: {exc}") from exc
        state = _AppClient(
            SyncClient(self.registry, settings, max_pool_size=self._max_pool_size),
            join_session=self._join_session,
        )
        app.extensions[EXTENSION_KEY] = state
        # The app's end is the client's: when it is collected, or at interpreter exit.
        weakref.finalize(app, state.close)

    def close(self, app: Flask | None = None) -> None:
        """Close the client of ``app`` (default: the current app) now; it reopens if used again."""
        self._state(app).close()

    @property
    def client(self) -> SyncClient:
        """The current app's client, open (its pool opens at the first use)."""
        return self._state(None).opened()

    def enqueue(self, job: NewJob, *, conn: Any | None = None) -> Job:
        """Enqueue ``job`` in the request's transaction (see :meth:`conn`), or in ``conn``."""
        return self.client.enqueue(job, conn=self.conn(conn))

    def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: Any | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Enqueue many jobs as :meth:`jobrun.SyncClient.enqueue_batch` does, in :meth:`conn`."""
        return self.client.enqueue_batch(jobs, conn=self.conn(conn))

    def enqueue_many(
        self,
        job_type: str,
        payloads: Iterable[Any],
        *,
        conn: Any | None = None,
        **options: Unpack[JobOptions],
    ) -> list[UUID]:
        """Enqueue one job per payload as :meth:`jobrun.SyncClient.enqueue_many` does."""
        return self.client.enqueue_many(job_type, payloads, conn=self.conn(conn), **options)

    def get(self, job_id: UUID) -> Job:
        """The job with ``job_id`` as stored now; JobNotFound when there is none."""
        return self.client.get(job_id)

    def conn(self, conn: Any | None = None) -> Any | None:
        """The transaction the enqueue methods write in: ``conn`` when given.

        Otherwise Flask-SQLAlchemy's ``db.session`` when the current app uses
        it (and ``join_session`` was left on), or None: the client's own short
        transaction. A session whose engine is not on the psycopg driver is
        refused with ConfigurationError, before anything is written.
        """
        if conn is not None:
            return conn
        sqlalchemy = current_app.extensions.get("sqlalchemy")
        if sqlalchemy is None or not self._state(None).join_session:
            return None
        session = sqlalchemy.session
        driver = session.get_bind().dialect.driver
        if driver != "psycopg":
            raise ConfigurationError(
                f"Flask-SQLAlchemy's engine uses the {driver} driver: jobrun joins db.session "
                "only on postgresql+psycopg://; use that driver, or Jobrun(join_session=False) "
                "to enqueue in jobrun's own transaction"
            )
        return session

    def _state(self, app: Flask | None) -> _AppClient:
        app = app if app is not None else current_app
        state = app.extensions.get(EXTENSION_KEY)
        if not isinstance(state, _AppClient):
            raise ConfigurationError(
                f"jobrun is not initialised on the Flask app {app.name!r}: call "
                "Jobrun(registry, app=app) or jobs.init_app(app)"
            )
        return state
