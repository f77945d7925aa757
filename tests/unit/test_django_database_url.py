"""jobrun.integrations.django.database_url: Django's DATABASES entry as a libpq URL."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from jobrun.errors import ConfigurationError
from jobrun.integrations.django import database_url

PG = "django.db.backends.postgresql"


def test_every_part_of_the_entry_reaches_libpq_intact() -> None:
    url = database_url(
        {
            "ENGINE": PG,
            "NAME": "shop db",
            "USER": "app@eu",
            "PASSWORD": "p:w/d?#",
            "HOST": "db.internal",
            "PORT": 6432,
            "OPTIONS": {"sslmode": "require", "connect_timeout": 5, "pool": True},
        }
    )
    assert conninfo_to_dict(url) == {
        "dbname": "shop db",
        "user": "app@eu",
        "password": "p:w/d?#",
        "host": "db.internal",
        "port": "6432",
        "sslmode": "require",
        "connect_timeout": "5",
    }


def test_a_socket_directory_and_no_credentials() -> None:
    url = database_url({"ENGINE": PG, "NAME": "app", "HOST": "/var/run/postgresql"})
    assert conninfo_to_dict(url) == {"dbname": "app", "host": "/var/run/postgresql"}


def test_another_engine_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"django.db.backends.sqlite3.*database_url"):
        database_url({"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"})


def test_options_django_handles_itself_stay_out_of_the_url() -> None:
    url = database_url(
        {
            "ENGINE": PG,
            "NAME": "app",
            "OPTIONS": {
                "isolation_level": 3,
                "assume_role": "app_owner",
                "prepare_threshold": 5,
                "server_side_binding": True,
                "application_name": "shop",
            },
        }
    )
    assert conninfo_to_dict(url) == {"dbname": "app", "application_name": "shop"}
