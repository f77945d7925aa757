"""Retention settings: the documented defaults, JOBRUN_* variables, and refused values."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobrun import Config, ConfigurationError
from jobrun.maintenance import MAINTENANCE_LOCK_KEY, Maintenance, Retention
from jobrun.scheduler import SCHEDULER_LOCK_KEY

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "MAINTENANCE",
        "MAINTENANCE_EVERY",
        "RETENTION_SUCCEEDED",
        "RETENTION_CANCELLED",
        "RETENTION_DEAD",
        "RETENTION_EVENTS",
        "RETENTION_EFFECTS",
    ):
        monkeypatch.delenv(f"JOBRUN_{name}", raising=False)


def test_the_documented_defaults() -> None:
    config = Config()
    assert config.maintenance is True
    assert config.maintenance_every == timedelta(minutes=1)
    assert config.retention == Retention(
        succeeded=DAY, cancelled=7 * DAY, dead=14 * DAY, events=14 * DAY, effects=90 * DAY
    )
    assert MAINTENANCE_LOCK_KEY != SCHEDULER_LOCK_KEY


def test_retention_comes_from_jobrun_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBRUN_MAINTENANCE", "false")
    monkeypatch.setenv("JOBRUN_MAINTENANCE_EVERY", "5m")
    monkeypatch.setenv("JOBRUN_RETENTION_SUCCEEDED", "2h")
    monkeypatch.setenv("JOBRUN_RETENTION_CANCELLED", "1d")
    monkeypatch.setenv("JOBRUN_RETENTION_DEAD", "30d")
    monkeypatch.setenv("JOBRUN_RETENTION_EVENTS", "3d")
    monkeypatch.setenv("JOBRUN_RETENTION_EFFECTS", "180d")
    config = Config()
    assert config.maintenance is False
    assert config.maintenance_every == timedelta(minutes=5)
    assert config.retention == Retention(
        succeeded=timedelta(hours=2),
        cancelled=DAY,
        dead=30 * DAY,
        events=3 * DAY,
        effects=180 * DAY,
    )


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"retention_dead": timedelta(0)}, "retention_dead must be positive"),
        ({"retention_events": timedelta(seconds=-1)}, "retention_events must be positive"),
        ({"maintenance_every": timedelta(0)}, "maintenance_every must be positive"),
        (
            {"retention_succeeded": 100 * DAY},
            "retention_effects .* must be at least retention_succeeded",
        ),
    ],
)
def test_unworkable_retention_is_refused_naming_the_setting(
    changes: dict[str, timedelta], needle: str
) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        Config(**changes)


def test_config_refuses_unworkable_retention_and_maintenance_keeps_its_own_checks() -> None:
    # What Retention and Maintenance(every=...) refused themselves, Config refuses once.
    with pytest.raises(ConfigurationError, match=r"retention_succeeded must be positive"):
        Config(retention_succeeded=timedelta(0))
    with pytest.raises(ConfigurationError, match=r"at least retention_succeeded"):
        Config(retention_effects=timedelta(hours=1))
    with pytest.raises(ConfigurationError, match="maintenance_every must be positive"):
        Config(maintenance_every=timedelta(0))
    config = Config()
    with pytest.raises(ConfigurationError, match="batch_size"):
        Maintenance(object(), object(), config, batch_size=0)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="statistics_every"):
        Maintenance(object(), object(), config, statistics_every=timedelta(0))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="statistics_every"):
        Maintenance(object(), object(), config, statistics_every=timedelta(seconds=-1))  # type: ignore[arg-type]
