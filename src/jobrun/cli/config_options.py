"""Command-line options derived from :class:`~jobrun.config.Config`'s fields.

A setting is declared once, on ``Config``: its name, type, default and the
docstring under it. ``jobrun worker`` takes one option per setting built here
from that declaration, so a setting added to ``Config`` is an option at once,
with the same name (``claim_ahead`` → ``--claim-ahead``), the same variable
(``JOBRUN_CLAIM_AHEAD``) and the same help.

The options pass text through unparsed and default to "not given": only the
options given on the command line reach ``Config``, which reads every other
setting from its ``JOBRUN_*`` variable or its own default and validates them
all in one place, naming the setting in one error line. So a flag and the
variable behind it cannot disagree about what a value means.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import Annotated, Any, get_args

import typer
from pydantic.fields import FieldInfo

from jobrun.config import Config
from jobrun.durations import format_duration

__all__ = ["ConfigOption", "config_options", "given_settings"]

_SHORT = {"queues": ("--queue", "-q")}
"""Option names that differ from the field's: a repeatable ``--queue`` adds one queue."""


@dataclass(frozen=True)
class ConfigOption:
    """One ``Config`` field as a typer parameter of a command."""

    field: str
    parameter: inspect.Parameter


def _is_flag(info: FieldInfo) -> bool:
    return info.annotation is bool


def _is_list(info: FieldInfo) -> bool:
    return getattr(info.annotation, "__origin__", None) is list


def _shown_default(info: FieldInfo) -> str:
    default = info.get_default(call_default_factory=True)
    if default is None:
        return "unset"
    if isinstance(default, timedelta):
        return format_duration(default)
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, Enum):
        return str(default.value)
    if isinstance(default, list):
        return ",".join(str(v) for v in default)
    return str(default)


_ROLE = re.compile(r":\w+:`~?(?:[\w.]*\.)?([\w]+)`")


def _metavar(info: FieldInfo) -> str:
    kinds = {timedelta: "DURATION", int: "INTEGER", float: "NUMBER", str: "TEXT"}
    for kind in (info.annotation, *get_args(info.annotation)):
        for arg in (kind, *get_args(kind)):
            if isinstance(arg, type) and issubclass(arg, Enum):
                return "|".join(str(member.value) for member in arg)
            if arg in kinds:
                return kinds[arg]
    return "TEXT"


def _help(info: FieldInfo) -> str:
    # The first sentence of the docstring under the field, as plain text: enough for --help.
    text = " ".join((info.description or "").split())
    text = _ROLE.sub(r"\1", text).replace("``", "")
    first, dot, _ = text.partition(". ")
    return first + ("." if dot else "")


def config_options(fields: Iterable[str]) -> list[ConfigOption]:
    """Typer parameters for ``fields`` of ``Config``, each defaulting to "not given"."""
    options = []
    for name in fields:
        info = Config.model_fields[name]
        envvars = "|".join(Config.variable_names(name))
        # Parentheses, not brackets: rich would read "[env: ...]" as markup.
        help_text = f"{_help(info)} (env: {envvars})"
        dashed = "--" + name.replace("_", "-")
        kind: Any
        if _is_flag(info):
            kind = bool | None
            decls: tuple[str, ...] = (f"{dashed}/--no-{name.replace('_', '-')}",)
        elif _is_list(info):
            kind = list[str] | None
            decls = _SHORT.get(name, (dashed,))
        else:
            kind = str | None
            decls = _SHORT.get(name, (dashed,))
        option = typer.Option(
            *decls,
            help=help_text.replace("[", "\\["),  # rich markup would eat "[metrics]"
            show_default=_shown_default(info),
            metavar=None if _is_flag(info) else _metavar(info),
        )
        parameter = inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[kind, option],
        )
        options.append(ConfigOption(name, parameter))
    return options


def given_settings(values: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """The ``Config`` arguments among a command's ``values``: those given, as given."""
    return {name: values[name] for name in fields if values.get(name) is not None}
