"""The CLI's duration parser and formatter."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest

from jobrun.cli.durations import DurationError, format_duration, human_duration, parse_duration
from jobrun.domain import MAX_DELAY


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("5m", timedelta(minutes=5)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("250ms", timedelta(milliseconds=250)),
        ("1.5h", timedelta(minutes=90)),
        (" 10S ", timedelta(seconds=10)),
        ("0s", timedelta(0)),
    ],
)
def test_parses(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "  ", "30", "s", "5x", "-5s", "1h 30m", "5m5m", "1.h", "h1", "1h30", "abc"]
)
def test_refuses(text: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert "duration" in str(info.value)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(seconds=3), "3s"),
        (timedelta(milliseconds=250), "250ms"),
        (timedelta(days=2, seconds=1), "2d1s"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(0), "0s"),
    ],
)
def test_formats(value: timedelta, text: str) -> None:
    assert format_duration(value) == text


@pytest.mark.parametrize("text", ["30s", "5m", "2h", "1d", "1h30m", "250ms"])
def test_round_trips(text: str) -> None:
    assert format_duration(parse_duration(text)) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0.0s"),
        (0.4, "0.4s"),
        (8.47734, "8.5s"),
        (26.4719, "26.5s"),
        (59.96, "1m 00s"),
        (125, "2m 05s"),
        (3780, "1h 03m"),
        (90_000, "1d 01h"),
    ],
)
def test_human_duration_is_one_rounded_format_at_every_size(seconds: float, text: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == text


@pytest.mark.parametrize("text", ["9999999999d", "3000000d", "99999999999d", "9" * 400 + "s"])
def test_parse_duration_refuses_durations_beyond_the_limit(text: str) -> None:
    with pytest.raises(DurationError, match="at most 100 years"):
        parse_duration(text)


def test_parse_duration_accepts_the_limit() -> None:
    assert parse_duration("36525d") == MAX_DELAY


def test_every_worker_setting_of_config_is_an_option_of_jobrun_worker() -> None:
    # Settings are declared once, on Config: the worker command derives its
    # options from the fields, so none can be missing or spelled differently.
    import typer.main

    import jobrun.cli
    from jobrun.cli.worker import WORKER_SETTINGS
    from jobrun.config import Config

    command = typer.main.get_command(jobrun.cli.app)
    worker = command.commands["worker"]  # type: ignore[attr-defined]
    names = {p.name for p in worker.params}
    shared = {"database_url", "pgbouncer", "direct_url"}
    # read_url is for the commands that only read: a worker reads nothing from a replica.
    read_only = {"read_url"}
    assert set(Config.model_fields) == set(WORKER_SETTINGS) | shared | read_only
    assert set(Config.model_fields) - read_only <= names
    assert "read_url" not in names
    for reader in ("web", "stats", "events"):
        assert "read_url" in {p.name for p in command.commands[reader].params}  # type: ignore[attr-defined]
    jobs = command.commands["jobs"]  # type: ignore[attr-defined]
    for reader in ("list", "show"):
        assert "read_url" in {p.name for p in jobs.commands[reader].params}


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"lease": "1.5s", "claim_ahead": "0s", "queues": ["a", "b"], "concurrency": 7},
        {"job_timeout": "off", "reap_every": "off", "gc_young_threshold": "off"},
        {"metrics_port": 0, "listen": False, "event_mode": "terminal", "retry_jitter": 0.25},
        {"heartbeat_every": "333ms", "lease": "1s", "retention_effects": "1w"},
    ],
)
def test_config_written_as_variables_reads_back_equal(
    settings: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `jobrun worker --processes N` hands its children their settings this way.
    from jobrun.config import Config

    for name in list(os.environ):
        if name.startswith("JOBRUN_"):
            monkeypatch.delenv(name)
    config = Config(**settings)
    for name, value in config.environment().items():
        monkeypatch.setenv(name, value)
    assert Config() == config


def test_a_worker_ignores_the_read_replica_of_a_shared_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobrun.cli.worker import _config

    monkeypatch.setenv("JOBRUN_READ_URL", "postgresql://replica.example/app")
    assert _config({}).read_url is None
    assert "JOBRUN_READ_URL" not in _config({}).environment()
