"""What ``jobrun worker --app`` loads in a Django project: Django set up, its jobs discovered.

``manage.py jobrun_worker`` runs ``jobrun worker --app
jobrun.integrations.django.worker_app``; so does each child of ``--processes``,
which starts as a plain ``python -m jobrun`` with ``DJANGO_SETTINGS_MODULE``
in its environment. Reading this module's ``registry`` sets Django up (once),
which imports every installed app's ``jobs.py`` into it; importing the
module alone does nothing.
"""

from __future__ import annotations

import logging

from jobrun.registry import Registry

__all__ = ["project_registry"]


def __getattr__(name: str) -> Registry:
    if name != "registry":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return project_registry()


def project_registry() -> Registry:
    """The project's registry, with Django set up and every app's ``jobs.py`` imported."""
    import django
    from django.apps import apps

    from jobrun.integrations.django import registry

    if not apps.ready:
        django.setup()
        # A project's LOGGING disables every logger that exists when Django
        # applies it, unless it says disable_existing_loggers=False; in a
        # --processes child that includes the jobrun loggers the command has
        # just set up.
        for logger_name, logger in list(logging.root.manager.loggerDict.items()):
            if logger_name.split(".")[0] == "jobrun" and isinstance(logger, logging.Logger):
                logger.disabled = False
    return registry
