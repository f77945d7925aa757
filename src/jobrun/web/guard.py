"""The dashboard's guard: who is asking, and whether they may change anything.

Safety is the default, so it is checked in one room before any page, API
call or action sees the request:

* HTTP Basic auth when the app is given credentials (compared in constant
  time); without them every request is ``anonymous``.
* A CSRF token by double submit: a random cookie set on the first response,
  which every POST must repeat in a form field or an ``X-CSRF-Token`` header.
  A cross-site page can make the browser send the cookie but cannot read it.
* A read-only mode that refuses every action with 403 (the pages also hide
  the controls).
* The actor: the name every action records (the authenticated user, or
  ``anonymous``, followed by ``via web``).
* A URL whose path or query, percent-decoded, holds a NUL or is not UTF-8
  is refused with 400 before anything reads it: no name or filter taken
  from it could be stored or matched (PostgreSQL text holds neither), and
  a decoder that replaced the bad bytes would act on a name nobody typed.

Every response also carries headers that keep it out of frames and stop
content sniffing.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from jobrun.web.bodies import BadRequest

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "Guard",
    "actor",
    "check_action",
    "url_problem",
]

CSRF_COOKIE = "jobrun_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """HTTP Basic auth and the CSRF cookie, as one ASGI middleware around the app.

    It puts the user and the request's CSRF token in the ASGI scope (keys
    "jobrun.user" and "jobrun.csrf") for :func:`actor` and :func:`check_action`.
    """

    def __init__(self, app: ASGIApp, auth: tuple[str, str] | None) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 without the right credentials; else pass the request on, adding headers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        # A host app that mounts the dashboard behind its own authentication
        # names the user it let in (jobrun.integrations.starlette).
        user = str(scope.get("jobrun.user") or "anonymous")
        if self.auth is not None:
            given = _basic_credentials(headers.get("authorization", ""))
            if given is None or not _same_credentials(given, self.auth):
                response = PlainTextResponse(
                    "authentication required\n",
                    status_code=401,
                    headers={"WWW-Authenticate": 'Basic realm="jobrun", charset="UTF-8"'},
                )
                await response(scope, receive, send)
                return
            user = given[0]
        scope["jobrun.user"] = user
        token = _cookie(headers.get("cookie", ""), CSRF_COOKIE)
        new_token = None
        if token is None or len(token) < 32:
            token = new_token = secrets.token_urlsafe(32)
        scope["jobrun.csrf"] = token
        path = (scope.get("root_path") or "") or "/"

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                extra = [
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin"),
                ]
                if new_token is not None:
                    cookie = f"{CSRF_COOKIE}={new_token}; Path={path}; HttpOnly; SameSite=Strict"
                    extra.append((b"set-cookie", cookie.encode("latin-1")))
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        problem = url_problem(scope)
        if problem is not None:
            refusal: Response
            if "/api/" in scope.get("path", ""):
                refusal = JSONResponse({"error": problem}, status_code=400)
            else:
                refusal = PlainTextResponse(problem + "\n", status_code=400)
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


def url_problem(scope: Scope) -> str | None:
    """Why the request's path or query cannot be read as text, or None.

    Both are checked as sent (``raw_path``, ``query_string``), percent-decoded
    to bytes: a NUL, or bytes that are not UTF-8 (a lone surrogate's encoding
    included), are refused by name.
    """
    raw_path = scope.get("raw_path") or str(scope.get("path", "")).encode()
    for part, raw in (("path", raw_path), ("query", scope.get("query_string") or b"")):
        decoded = unquote_to_bytes(raw)
        if b"\x00" in decoded:
            return f"the URL's {part} must not contain a NUL character (%00)"
        try:
            decoded.decode("utf-8")
        except UnicodeDecodeError:
            return f"the URL's {part} is not UTF-8 text once percent-decoded"
    return None


def check_action(request: Request, read_only: bool, form: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`~jobrun.web.bodies.BadRequest` (403) unless the request may act.

    Refused on a read-only dashboard, and unless the CSRF cookie is the one
    the guard saw and the header (or, from a page, the ``csrf`` form field)
    repeats it.
    """
    if read_only:
        raise BadRequest("the dashboard is read-only", 403)
    expected = request.scope.get("jobrun.csrf", "")
    cookie = _cookie(request.headers.get("cookie", ""), CSRF_COOKIE)
    given = request.headers.get(CSRF_HEADER) or (form.get(CSRF_FIELD) if form else None)
    if (
        not cookie
        or not given
        or not secrets.compare_digest(str(given).encode(), cookie.encode())
        or not secrets.compare_digest(cookie.encode(), str(expected).encode())
    ):
        raise BadRequest("missing or wrong CSRF token", 403)


def actor(request: Request) -> str:
    """Who asks, as actions record it: ``<user> via web`` (``anonymous`` without auth)."""
    return f"{request.scope.get('jobrun.user', 'anonymous')} via web"


def _basic_credentials(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def _same_credentials(given: tuple[str, str], expected: tuple[str, str]) -> bool:
    user_ok = secrets.compare_digest(given[0].encode(), expected[0].encode())
    password_ok = secrets.compare_digest(given[1].encode(), expected[1].encode())
    return user_ok and password_ok


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None
