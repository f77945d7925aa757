"""The same check as tests.py, written for pytest with pytest-django."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client

from accounts.models import Outbox
from jobrun.integrations.django.testing import migrated, run_jobs


@pytest.fixture
def jobrun_tables(transactional_db: None) -> Iterator[None]:
    """jobrun's tables in the test database; the client closed before Django drops it."""
    with migrated():
        yield


def test_a_signup_s_welcome_runs_once(client: Client, jobrun_tables: None) -> None:
    """A committed signup's welcome runs once; a duplicate's job was rolled back."""
    form = {"email": "lin@example.com", "name": "Lin"}
    assert client.post("/signup", form, content_type="application/json").status_code == 201
    assert client.post("/signup", form, content_type="application/json").status_code == 409
    assert run_jobs().jobs == 1
    assert list(Outbox.objects.values_list("email", flat=True)) == ["lin@example.com"]
