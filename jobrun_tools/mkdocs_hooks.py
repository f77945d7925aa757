"""MkDocs hooks of the documentation site (``hooks:`` in ``mkdocs.yml``).

jobrun's docstrings are written for Python's own tools: cross-references
use Sphinx roles (``:class:`~jobrun.client.Client```), which Markdown renders
as the role's name followed by a code span. The API pages show them as the
code span alone, with the ``~`` form shortened to its last name, as Sphinx
would.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["on_page_content"]

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>(~?)([^<]*)</code>")


def _code(match: re.Match[str]) -> str:
    short, name = match.group(1), match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if short else name}</code>"


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML with Sphinx roles rendered as plain code spans."""
    return _ROLE.sub(_code, html)
