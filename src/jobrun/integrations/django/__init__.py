"""jobrun as a Django app: settings from ``settings.JOBRUN``, jobs from each app's ``jobs.py``.

::

    # settings.py
    INSTALLED_APPS = [..., "jobrun.integrations.django"]
    JOBRUN = {"queues": ["default", "mail"], "concurrency": 20}   # optional

    # myapp/jobs.py: discovered when Django starts
    from jobrun.integrations.django import registry

    @registry.handler("mail.welcome")
    async def send_welcome(ctx, payload): ...

    # myapp/views.py
    from django.db import connection, transaction
    from jobrun.integrations.django import client

    with transaction.atomic():
        user = User.objects.create(...)
        client().enqueue(registry.new_job("mail.welcome", {"id": user.pk}), conn=connection)

    $ python manage.py jobrun_migrate       # jobrun's tables, beside Django's
    $ python manage.py jobrun_worker        # the options of `jobrun worker`

Settings: ``settings.JOBRUN`` is a dict of :class:`jobrun.Config` fields; the
``JOBRUN_*`` variables fill what it leaves out, and the database is Django's
``default`` one unless ``database_url`` says otherwise. Django's connection
must use the psycopg 3 backend (Django 4.2+ picks it when psycopg is
installed) for ``conn=connection`` to share its transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from jobrun.config import Config
from jobrun.errors import ConfigurationError
from jobrun.registry import Registry
from jobrun.sync_client import SyncClient

__all__ = ["client", "close_client", "config", "database_url", "registry"]

registry = Registry()
"""The registry of the project's handlers: each installed app's ``jobs.py`` adds to it."""

# OPTIONS keys Django's PostgreSQL backend consumes itself rather than pass to
# libpq, which rejects them in a URL ("invalid URI query parameter").
_DJANGO_ONLY_OPTIONS = frozenset(
    {
        "assume_role",
        "context",
        "cursor_factory",
        "isolation_level",
        "pool",
        "prepare_threshold",
        "server_side_binding",
    }
)

_lock = threading.Lock()
_client: SyncClient | None = None


def database_url(settings_dict: dict[str, Any]) -> str:
    """A PostgreSQL URL for one of Django's ``DATABASES`` entries.

    Its libpq ``OPTIONS`` (``sslmode``, ``connect_timeout``, ...) become the
    query; those Django's backend handles itself (``isolation_level``,
    ``assume_role``, ``pool``, ...) are left out.
    """
    engine = str(settings_dict.get("ENGINE", ""))
    if not engine.endswith("postgresql"):
        raise ConfigurationError(
            f"jobrun needs a PostgreSQL database, and Django's is {engine or 'not set'}: "
            "set JOBRUN = {'database_url': ...} or use django.db.backends.postgresql"
        )
    user = quote(str(settings_dict.get("USER") or ""), safe="")
    password = quote(str(settings_dict.get("PASSWORD") or ""), safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = str(settings_dict.get("HOST") or "")
    port = str(settings_dict.get("PORT") or "")
    where = (f"[{host}]" if ":" in host else quote(host, safe="")) + (f":{port}" if port else "")
    name = quote(str(settings_dict.get("NAME") or ""), safe="")
    options = {
        key: value
        for key, value in (settings_dict.get("OPTIONS") or {}).items()
        if key not in _DJANGO_ONLY_OPTIONS
        and isinstance(value, str | int)
        and not isinstance(value, bool)
    }
    query = f"?{urlencode(options)}" if options else ""
    return f"postgresql://{credentials}{where}/{name}{query}"


def config() -> Config:
    """The project's settings: ``settings.JOBRUN`` over ``JOBRUN_*``, on Django's database."""
    from django.conf import settings
    from django.db import connections

    given = getattr(settings, "JOBRUN", None) or {}
    if not isinstance(given, Mapping):
        raise ConfigurationError(
            f"settings.JOBRUN must be a dict of jobrun.Config fields, not {type(given).__name__}"
        )
    given = dict(given)
    if "database_url" not in given:
        given["database_url"] = database_url(connections["default"].settings_dict)
    try:
        return Config(**given)
    except ConfigurationError as error:
        # Config's message names the field; say where the project set it.
        raise ConfigurationError(f"settings.JOBRUN (or a JOBRUN_* variable): {error}") from error


def client() -> SyncClient:
    """The process's :class:`jobrun.SyncClient`, on the project's settings and registry.

    Opened at first use and shared by every thread; :func:`close_client`
    closes it (the test helpers do, between databases).
    """
    global _client
    with _lock:
        if _client is None:
            _client = SyncClient(registry, config()).open()
        return _client


def close_client() -> None:
    """Close the process's client, if one was opened; the next :func:`client` opens another."""
    global _client
    with _lock:
        opened, _client = _client, None
    if opened is not None:
        opened.close()
