"""The package's version, read from one place: ``[project] version`` in pyproject.toml.

An installed jobrun (a wheel, or an editable install from a checkout) knows its
version from its distribution's metadata, which the build copied from
pyproject.toml. A bare source tree on ``sys.path`` with no install has no
metadata; there the version is read from the checkout's pyproject.toml, and
anything else gets ``0+unknown`` rather than an error at import.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

__all__ = ["version"]


def version() -> str:
    """The version of the jobrun this module belongs to."""
    try:
        return metadata.version("jobrun")
    except metadata.PackageNotFoundError:
        pass
    # src/jobrun/_version.py -> the checkout's root, two levels above the package.
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        return "0+unknown"
    if project.get("name") != "jobrun" or not isinstance(project.get("version"), str):
        return "0+unknown"
    return str(project["version"])
