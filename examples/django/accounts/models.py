"""The accounts app's tables."""

from __future__ import annotations

from django.db import models


class Member(models.Model):
    """Someone who signed up; an email signs up once."""

    email = models.EmailField(unique=True)
    name = models.CharField(max_length=200)


class Outbox(models.Model):
    """A welcome email, written by the welcome job's commit callback."""

    email = models.EmailField()
    body = models.TextField()
