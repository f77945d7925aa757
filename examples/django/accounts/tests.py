"""The accounts app's tests: Django's test runner, jobs run on the test database."""

from __future__ import annotations

from django.db import connection

from accounts.models import Member, Outbox
from jobrun.integrations.django.testing import JobrunTestCase, run_jobs


class SignupTests(JobrunTestCase):
    """A signup's welcome runs once; a duplicate signup enqueues nothing."""

    def test_a_signup_s_welcome_runs_once_and_a_duplicate_enqueues_nothing(self) -> None:
        """The first signup commits its job; the second rolls back with its job."""
        made = self.client.post(
            "/signup", {"email": "ada@example.com", "name": "Ada"}, content_type="application/json"
        )
        self.assertEqual(made.status_code, 201)
        again = self.client.post(
            "/signup", {"email": "ada@example.com", "name": "Ada"}, content_type="application/json"
        )
        self.assertEqual(again.status_code, 409)
        self.assertEqual(run_jobs().jobs, 1)
        self.assertEqual(Member.objects.count(), 1)
        self.assertEqual(
            list(Outbox.objects.values_list("email", "body")),
            [("ada@example.com", "Hello Ada, welcome aboard.")],
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM jobs WHERE type = 'welcome'")
            self.assertEqual(cursor.fetchone(), (1,))
