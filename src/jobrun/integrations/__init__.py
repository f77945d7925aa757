"""jobrun inside the web frameworks services already run on.

:mod:`jobrun.integrations.starlette` opens a :class:`jobrun.Client` for a
Starlette or FastAPI app's lifetime and mounts the dashboard behind the app's
own authentication; :mod:`jobrun.integrations.fastapi` adds the client and a
route's transaction as FastAPI dependencies; :mod:`jobrun.integrations.django`
is a Django app (settings, the handlers of each app's ``jobs.py``,
``manage.py jobrun_worker``); :mod:`jobrun.integrations.flask` holds a
:class:`jobrun.SyncClient` per Flask app and enqueues in Flask-SQLAlchemy's
session. Sharing the caller's transaction needs no integration: ``conn=``
takes SQLAlchemy's and Django's connections as they are (see
:mod:`jobrun.postgres.holders`).
"""
