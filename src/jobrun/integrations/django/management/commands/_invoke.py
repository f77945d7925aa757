"""Running a ``jobrun`` CLI command inside ``manage.py``, on the project's settings."""

from __future__ import annotations

import os
import sys

from jobrun.integrations.django import config


def run_jobrun(*argv: str) -> None:
    """Run ``jobrun <argv>`` in this process, with the project's settings as ``JOBRUN_*``.

    The settings go through the environment, where the command (and a
    ``--processes`` supervisor's children) reads them; options on the
    command line still win over them, as they do over any variable.
    """
    from jobrun.cli.app import main

    for name, value in config().environment().items():
        os.environ[name] = value
    saved = sys.argv
    sys.argv = ["jobrun", *argv]
    try:
        main()
    finally:
        sys.argv = saved
