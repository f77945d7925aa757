"""The site's reference pages cover the code: every command, option, setting and public name.

The command-line and settings pages are generated (``scripts/docs-reference``)
and checked in; the first test fails when they are stale. The others read the
code on their own, not through the generator, so a generator that dropped
something would fail them too.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import typer.main
from jobrun_tools.docs_reference import render_all

import jobrun
import jobrun.testing
from jobrun.cli import app
from jobrun.config import Config

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def test_the_generated_pages_are_up_to_date() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, text in render_all().items()
        if not path.exists() or path.read_text() != text
    ]
    assert stale == [], f"stale: {stale}; run scripts/docs-reference"


def test_every_setting_is_in_the_settings_page_with_its_variables() -> None:
    page = (REFERENCE / "settings.md").read_text()
    for name, info in Config.model_fields.items():
        (row,) = [line for line in page.splitlines() if line.startswith(f"| `{name}` |")]
        for variable in Config.variable_names(name):
            assert f"`{variable}`" in row
        assert info.description, f"Config.{name} has no docstring to document it by"


def _walk(prefix: str, command: object) -> list[tuple[str, object]]:
    found = [(prefix, command)]
    if hasattr(command, "list_commands"):
        context = type(command).context_class(command)  # type: ignore[attr-defined]
        for name in command.list_commands(context):
            found += _walk(f"{prefix} {name}", command.get_command(context, name))
    return found


def test_every_command_and_option_is_in_the_cli_page() -> None:
    page = (REFERENCE / "cli.md").read_text()
    sections = re.split(r"^#+ `(jobrun[^`]*)`$", page, flags=re.M)
    by_command = dict(zip(sections[1::2], sections[2::2], strict=True))
    commands = _walk("jobrun", typer.main.get_command(app))
    assert len(commands) > 20
    for name, command in commands[1:]:
        assert name in by_command, f"{name} is not documented"
        for param in command.params:  # type: ignore[attr-defined]
            if param.param_type_name == "option" and not param.hidden:
                for option in (*param.opts, *param.secondary_opts):
                    assert f"`{option}" in by_command[name], f"{name} {option} is not documented"
                assert param.help, f"{name} {param.opts[0]} has no help"


def _documented_names() -> set[str]:
    text = "\n".join(p.read_text() for p in (REFERENCE / "python").glob("*.md"))
    return set(re.findall(r"^::: ([\w.]+)$", text, re.M))


def test_every_public_name_of_jobrun_is_in_the_api_reference() -> None:
    documented = _documented_names()
    missing = [name for name in jobrun.__all__ if f"jobrun.{name}" not in documented]
    assert missing == []


def test_the_test_kit_is_in_the_api_reference() -> None:
    documented = _documented_names()
    # HandlerTimedOut is one error, documented once, as jobrun.HandlerTimedOut.
    names = [n for n in jobrun.testing.__all__ if n not in jobrun.__all__]
    assert [n for n in names if f"jobrun.testing.{n}" not in documented] == []


SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


def _shell_commands(text: str) -> list[list[str]]:
    """Each ``jobrun`` command line of the page's sh blocks, as its words."""
    found = []
    for block in SH_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words.pop(0)  # VAR=value before the command
            if words and words[0].endswith("jobrun"):
                found.append(words)
    return found


def test_every_jobrun_command_line_in_the_docs_names_real_commands_and_options() -> None:
    root = typer.main.get_command(app)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    checked = 0
    for page in pages:
        for words in _shell_commands(page.read_text()):
            command, rest = root, words[1:]
            while rest and hasattr(command, "list_commands") and not rest[0].startswith("-"):
                context = type(command).context_class(command)
                sub = command.get_command(context, rest[0])
                if sub is None:
                    break
                command, rest = sub, rest[1:]
            # Only the app's own options (jobrun --version) stand without a command.
            alone = bool(rest) and rest[0].startswith("-")
            assert command is not root or alone, f"{page.name}: no such command: {' '.join(words)}"
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            known.add("--help")
            for word in rest:
                if word.startswith("-") and not re.fullmatch(r"-\d.*", word):
                    option = word.split("=", 1)[0]
                    assert option in known, f"{page.name}: {option} is not an option of {words}"
            checked += 1
    assert checked > 30


def test_the_readmes_links_into_the_repository_resolve() -> None:
    # mkdocs checks the site's own links; the README is outside the site.
    targets = re.findall(r"\]\(((?!https?:)[^)#\s]+)", (ROOT / "README.md").read_text())
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []
