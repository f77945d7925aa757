"""``manage.py jobrun_worker``: ``jobrun worker`` on the project's handlers and settings."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from jobrun.integrations.django.management.commands._invoke import run_jobrun


class Command(BaseCommand):
    """Run the handlers of every installed app's ``jobs.py`` until SIGTERM or SIGINT."""

    help = (
        "Run jobrun's worker on the handlers of every installed app's jobs.py; "
        "takes every option of `jobrun worker` (see `manage.py jobrun_worker --help`)."
    )

    def run_from_argv(self, argv: list[str]) -> None:
        """Hand every argument after the command's name to ``jobrun worker``."""
        extra = argv[2:]
        if any(arg in ("-h", "--help") for arg in extra):
            run_jobrun("worker", "--help")
            return
        run_jobrun("worker", "--app", "jobrun.integrations.django.worker_app", *extra)

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the worker (``call_command("jobrun_worker")`` lands here)."""
        run_jobrun("worker", "--app", "jobrun.integrations.django.worker_app", *args)
