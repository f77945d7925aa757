"""``POST /signup``: the member's row and their welcome job, in one transaction."""

from __future__ import annotations

import json

from django.db import IntegrityError, connection, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from accounts.jobs import Welcome
from accounts.models import Member
from jobrun.integrations.django import client, registry


@csrf_exempt
@require_POST
def signup(request: HttpRequest) -> JsonResponse:
    """Enqueue the welcome, then create the member: a duplicate email rolls both back."""
    form = json.loads(request.body)
    try:
        with transaction.atomic():
            job = client().enqueue(
                registry.new_job("welcome", Welcome(email=form["email"], name=form["name"])),
                conn=connection,
            )
            Member.objects.create(email=form["email"], name=form["name"])
    except IntegrityError:
        return JsonResponse({"error": f"{form['email']} has signed up already"}, status=409)
    return JsonResponse({"job": str(job.id)}, status=201)
