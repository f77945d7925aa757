"""The Django app: discovers each installed app's ``jobs`` module when Django starts."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class JobrunConfig(AppConfig):
    """``jobrun.integrations.django`` in ``INSTALLED_APPS``; its label is ``jobrun``."""

    name = "jobrun.integrations.django"
    label = "jobrun"
    verbose_name = "jobrun"

    def ready(self) -> None:
        """Import every installed app's ``jobs.py``, whose handlers join the registry."""
        autodiscover_modules("jobs")
