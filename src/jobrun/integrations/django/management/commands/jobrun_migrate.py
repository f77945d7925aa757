"""``manage.py jobrun_migrate``: jobrun's migrations, on the project's database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from jobrun.integrations.django.management.commands._invoke import run_jobrun


class Command(BaseCommand):
    """Apply jobrun's pending migrations (its own tables, beside Django's)."""

    help = "Apply jobrun's pending migrations to the project's database (`jobrun migrate`)."

    def handle(self, *args: Any, **options: Any) -> None:
        """Run ``jobrun migrate``."""
        run_jobrun("migrate")
