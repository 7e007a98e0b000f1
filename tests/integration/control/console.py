"""Driving the web console of a real server as a browser would, with httpx: a visitor
that logs in through the form and sends forms with the CSRF token of the page."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx

from tests.integration.control.serving import _CLIENTS

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_LOG_BOX = re.compile(r'<pre class="log[^"]*" data-task="([^"]+)">(.*?)</pre>', re.S)


def csrf_of(page: str) -> str:
    """The CSRF token of the first form on ``page``."""
    found = _CSRF.search(page)
    assert found is not None, f"no CSRF token on the page: {page[:500]}"
    return found.group(1)


def log_boxes(page: str) -> dict[str, str]:
    """The log boxes of a job page or of its log fragment: each task's text, by task, in
    the page's order."""
    return {html.unescape(task): html.unescape(text) for task, text in _LOG_BOX.findall(page)}


def altered(token: str) -> str:
    """``token`` with its last character changed (a forged token that differs by one)."""
    return token[:-1] + ("1" if token.endswith("0") else "0")


class Visitor:
    """One browser: its cookies, not following redirects (tests look at them)."""

    def __init__(self, url: str) -> None:
        self.origin = url
        self.http = httpx.Client(base_url=f"{url}/ui", follow_redirects=False, timeout=30)
        _CLIENTS.append(self.http)

    def get(self, path: str, expect: int = 200, **params: Any) -> httpx.Response:
        response = self.http.get(path, params=params)
        assert response.status_code == expect, (response.status_code, response.text[:2000])
        return response

    def post(
        self, path: str, form: dict[str, str], *, page: str | None = None, expect: int = 303
    ) -> httpx.Response:
        """Send ``form`` to ``path`` with the CSRF token of ``page`` (a path to read it
        from first; None: send ``form`` as it is)."""
        if page is not None:
            form = {"csrf": csrf_of(self.get(page).text), **form}
        response = self.http.post(path, data=form, headers={"Origin": self.origin})
        assert response.status_code == expect, (response.status_code, response.text[:2000])
        return response

    def login(self, token: str) -> httpx.Response:
        return self.post("/login", {"token": token}, page="/login")


def signed_in(url: str, token: str) -> Visitor:
    """A visitor logged in with ``token``."""
    visitor = Visitor(url)
    visitor.login(token)
    return visitor


def good_job(name: str, queue: str = "default", command: str = "print('hello')") -> str:
    """A Job document (YAML) whose one task runs ``command`` in Python."""
    return f"""\
apiVersion: phalanx/v1
kind: Job
metadata:
  name: {name}
spec:
  queue: {queue}
  roles:
  - name: worker
    replicas: 1
    resources: {{cpu: 1, memory: 1Gi}}
    command: ["python", "-c", "{command}"]
"""
