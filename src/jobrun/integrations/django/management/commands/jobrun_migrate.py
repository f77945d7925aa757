"""``manage.py jobrun_migrate``: ``jobrun migrate`` on the project's database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from jobrun.integrations.django.management.commands._invoke import run_jobrun


class Command(BaseCommand):
    """Apply jobrun's pending migrations (its own tables, beside Django's)."""

    help = (
        "Apply jobrun's pending migrations to the project's database; takes what "
        "`jobrun migrate` takes (`manage.py jobrun_migrate status` lists them)."
    )

    def run_from_argv(self, argv: list[str]) -> None:
        """Hand every argument after the command's name to ``jobrun migrate``."""
        run_jobrun("migrate", *argv[2:])

    def handle(self, *args: Any, **options: Any) -> None:
        """Run ``jobrun migrate`` (``call_command("jobrun_migrate")`` lands here)."""
        run_jobrun("migrate", *args)
