"""Cross-site request forgery: every form that changes something carries a token bound
to the visitor's session, and a POST from another origin is refused.

Guarantees: a signed-in form's token is HMAC-SHA256(server secret, session token), so it
cannot be made without the session's cookie, which scripts cannot read (HttpOnly) and
other sites do not send (SameSite=Strict). The login form, before there is a session,
is bound the same way to a random nonce in a cookie of its own (double submit). A POST
whose ``Origin`` (or, without one, ``Referer``) names another origin is refused whatever
its token. Refusals raise ``CsrfRefused`` (a 403 page that says what to do).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final
from urllib.parse import parse_qs, urlsplit

from fastapi import Request

from phalanx.domain.errors import RequestRefused
from phalanx.web.console import console_of

#: The form field that carries the token.
FIELD: Final = "csrf"
#: Largest form body read (a Job document is pasted into one; the API's own limit is 10 MiB).
MAX_FORM: Final = 10 * 1024 * 1024


class CsrfRefused(RequestRefused):
    """A state-changing request without a valid CSRF token, or from another origin."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def token_for(request: Request, bound_to: str) -> str:
    """The CSRF token of forms whose session (or login nonce) is ``bound_to``."""
    secret = console_of(request).secret
    return hmac.new(secret, bound_to.encode(), hashlib.sha256).hexdigest()


def check_origin(request: Request) -> None:
    """Refuse a request whose ``Origin`` or ``Referer`` names another origin than this
    server's (neither header: allowed, the token decides)."""
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    origin = request.headers.get("origin")
    if origin is None and (referer := request.headers.get("referer")):
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}"
    if origin is not None and origin != own:
        raise CsrfRefused(f"the form was sent from {origin}, not from this console ({own})")


def check(request: Request, form: dict[str, str], bound_to: str | None) -> None:
    """Refuse ``form`` unless it carries the token of ``bound_to`` and comes from here."""
    check_origin(request)
    sent = form.get(FIELD, "")
    if bound_to is None or not sent:
        raise CsrfRefused("the form carries no CSRF token, or there is no session to match it")
    if not hmac.compare_digest(sent, token_for(request, bound_to)):
        raise CsrfRefused("the form's CSRF token does not match this session")


async def read_form(request: Request) -> dict[str, str]:
    """The fields of an ``application/x-www-form-urlencoded`` body (first value of each),
    line breaks as ``\\n``; {} for any other body."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return {}
    body = await request.body()
    if len(body) > MAX_FORM:
        return {}
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0].replace("\r\n", "\n") for name, values in fields.items()}
