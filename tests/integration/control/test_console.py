"""The web console at ``/ui`` of a real server, driven over HTTP as a browser would.

Sessions: a login sets an HttpOnly, SameSite=Strict cookie on ``/ui``; no token is ever in
a URL or a page; every page without a session leads to the login form. Forms: no CSRF
token (or another origin) -> 403, nothing done. Tenancy: a user sees exactly what the
API lets them see (another user's job is not found, by page, fragment, log or list;
the admin page is refused). Submit: a malformed document shows the CLI's message at
the field; a good one creates the job and leads to its page.
"""

from __future__ import annotations

import re

from phalanx.control.server import Server
from tests.integration.control.console import (
    Visitor,
    altered,
    csrf_of,
    good_job,
    log_boxes,
    signed_in,
)
from tests.integration.control.serving import Api, role

PAGES = ("/jobs", "/admin", "/submit", "/jobs/any", "/fragments/jobs", "/fragments/admin")


def test_a_login_sets_an_http_only_cookie_and_no_page_or_url_holds_the_token(
    server: Server,
) -> None:
    token = server.admin_token
    assert token is not None
    Api(server.url, token).queue("default", deserved={"gpu": 4})
    visitor = Visitor(server.url)
    login = visitor.get("/login")
    assert token not in login.text
    answer = visitor.login(token)
    assert answer.headers["location"] == "/ui/"
    cookies = [c for c in answer.headers.get_list("set-cookie") if "phalanx_session=" in c]
    assert len(cookies) == 1
    attributes = {part.strip().lower() for part in cookies[0].split(";")[1:]}
    assert {"httponly", "path=/ui", "samesite=strict"} <= attributes
    assert "secure" not in attributes  # plain http on the loopback
    seen = [visitor.get("/jobs"), visitor.get("/admin"), visitor.get("/submit")]
    for page in seen:
        assert token not in page.text
        assert token not in str(page.url)
        assert 'id="user-name">admin<' in page.text  # the nav: name and role
    assert token not in answer.headers["location"]


def test_pages_may_not_be_framed_nor_run_foreign_script(server: Server) -> None:
    token = server.admin_token
    assert token is not None
    visitor = Visitor(server.url)
    pages = [visitor.get("/login")]
    visitor.login(token)
    pages += [visitor.get("/jobs"), visitor.get("/admin"), visitor.get("/static/console.js")]
    for page in pages:
        policy = dict(
            d.strip().split(" ", 1) for d in page.headers["content-security-policy"].split(";")
        )
        assert policy["frame-ancestors"] == "'none'"
        assert policy.get("script-src", policy["default-src"]) == "'self'"  # no inline script
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"


def test_pages_without_a_session_lead_to_the_login_form(server: Server) -> None:
    visitor = Visitor(server.url)
    for path in PAGES:
        answer = visitor.get(path, expect=303)
        assert answer.headers["location"].startswith("/ui/login?next=")
    answer = visitor.get("/jobs", expect=303, ended="true")
    assert answer.headers["location"] == "/ui/login?next=%2Fui%2Fjobs%3Fended%3Dtrue"
    # a page's refresh is told 401 (its script reloads the page), never a login form
    assert (
        visitor.http.get("/fragments/jobs", headers={"X-Phalanx-Refresh": "1"}).status_code == 401
    )
    # a token the API does not know is no session either
    visitor.http.cookies.set("phalanx_session", "phx_forged", path="/ui")
    assert visitor.get("/jobs", expect=303).headers["location"].startswith("/ui/login")
    # a wrong token at the form is refused at the field
    refused = visitor.post("/login", {"token": "phx_wrong"}, page="/login", expect=401).text
    assert "token: unknown or revoked token" in refused
    # after login, the page asked for first
    token = server.admin_token
    assert token is not None
    page = visitor.get("/login", next="/ui/submit").text
    answer = visitor.post("/login", {"token": token, "next": "/ui/submit", "csrf": csrf_of(page)})
    assert answer.headers["location"] == "/ui/submit"
    # and never to another site
    page = visitor.get("/login").text
    answer = visitor.post(
        "/login", {"token": token, "next": "//evil.example/", "csrf": csrf_of(page)}
    )
    assert answer.headers["location"] == "/ui/"


def test_forms_without_the_csrf_token_or_from_another_origin_are_refused(server: Server) -> None:
    token = server.admin_token
    assert token is not None
    api = Api(server.url, token)
    api.queue("default", deserved={"cpu": 8000})
    api.submit("sleeper", "default", role(command=["sleep", "600"]))
    visitor = Visitor(server.url)
    # login: no token, or a token without the login cookie's nonce
    refused = visitor.post("/login", {"token": token}, expect=403).text
    assert "CSRF" in refused
    stranger = Visitor(server.url)
    other = csrf_of(stranger.get("/login").text)
    visitor.post("/login", {"token": token, "csrf": other}, expect=403)
    visitor.login(token)
    page = visitor.get("/jobs/sleeper").text
    good = csrf_of(page)
    for form in ({}, {"csrf": ""}, {"csrf": other}, {"csrf": altered(good)}):
        visitor.post("/jobs/sleeper/cancel", form, expect=403)
        visitor.post("/submit", {**form, "document": good_job("forged")}, expect=403)
        visitor.post("/logout", form, expect=403)
    # the right token from another origin
    answer = visitor.http.post(
        "/jobs/sleeper/cancel", data={"csrf": good}, headers={"Origin": "http://evil.example"}
    )
    assert answer.status_code == 403
    assert "evil.example" in answer.text
    assert api.job("sleeper")["cancel_requested"] is False
    assert api.get("/api/v1/jobs/forged", expect=404)
    # the right token from here: cancelled
    visitor.post("/jobs/sleeper/cancel", {"csrf": good})
    assert api.job("sleeper")["cancel_requested"] is True
    # logout ends the session
    visitor.post("/logout", {"csrf": good})
    visitor.get("/jobs", expect=303)


def test_a_user_sees_only_their_own_jobs_and_not_the_admin_page(server: Server) -> None:
    token = server.admin_token
    assert token is not None
    admin = Api(server.url, token)
    admin.queue("default", deserved={"cpu": 8000})
    alice, bob = admin.user("alice"), admin.user("bob")
    alice.submit("alice-job", "default", role(command=["python", "-c", "print('secret')"]))
    alice.wait_phase("alice-job", "Succeeded")
    as_bob = signed_in(server.url, bob.token)
    for path in ("/jobs/alice-job", "/fragments/jobs/alice-job", "/fragments/jobs/alice-job/logs"):
        answer = as_bob.get(path, expect=404)
        assert "secret" not in answer.text
        assert "no job named 'alice-job'" in answer.text.replace("&#39;", "'")
    assert "alice-job" not in as_bob.get("/jobs", ended="true").text
    assert "alice-job" not in as_bob.get("/fragments/jobs", ended="true").text
    as_bob.post("/jobs/alice-job/cancel", {}, page="/jobs", expect=404)
    refused = as_bob.get("/admin", expect=403).text
    assert "bob is not an admin" in refused
    as_bob.get("/fragments/admin", expect=403)
    assert 'href="/ui/admin"' not in as_bob.get("/jobs").text
    # alice sees hers, with its log; the admin sees it too
    as_alice = signed_in(server.url, alice.token)
    assert "alice-job" not in as_alice.get("/jobs").text  # live jobs only, unless asked
    assert "alice-job" in as_alice.get("/jobs", ended="true").text
    every = as_alice.get("/fragments/jobs/alice-job/logs").text
    assert log_boxes(every) == {"alice-job-worker-0": "secret\n"}
    as_admin = signed_in(server.url, token)
    assert "alice-job" in as_admin.get("/fragments/jobs", ended="true").text


def test_a_malformed_document_shows_the_field_error_and_a_good_one_creates_the_job(
    server: Server,
) -> None:
    token = server.admin_token
    assert token is not None
    api = Api(server.url, token)
    api.queue("default", deserved={"cpu": 8000})
    alice = api.user("alice")
    visitor = signed_in(server.url, alice.token)
    unknown = good_job("typo").replace("  queue: default\n", "  queue: default\n  replicaz: 2\n")
    page = visitor.post("/submit", {"document": unknown}, page="/submit", expect=422).text
    error = re.search(r'<div class="field-error".*?</div>', page, re.S)
    assert error is not None, page
    assert '<code id="error-field">spec.replicaz</code>' in error.group(0)
    assert "the form document 1 (Job typo), line 7: spec.replicaz: unknown field" in error.group(0)
    assert "fix: allowed:" in error.group(0)
    assert "replicaz: 2" in page  # the text is kept, to be corrected
    broken = visitor.post("/submit", {"document": "kind: Job\nspec: ["}, page="/submit", expect=422)
    assert "line 2, column 8" in broken.text and "check the YAML there" in broken.text
    # text that looks like a path is a document, never a file the server reads
    path = visitor.post("/submit", {"document": "/etc/passwd"}, page="/submit", expect=422)
    assert "expected a mapping" in path.text and "root:" not in path.text
    queue = visitor.post("/submit", {"document": "kind: Queue"}, page="/submit", expect=422)
    assert "kind" in queue.text
    # an API refusal at its field too: a queue that does not exist
    missing = visitor.post(
        "/submit", {"document": good_job("lost", queue="nowhere")}, page="/submit", expect=422
    )
    assert "spec.queue" in missing.text
    answer = visitor.post("/submit", {"document": good_job("hello")}, page="/submit")
    assert answer.headers["location"] == "/ui/jobs/hello"
    assert alice.wait_phase("hello", "Succeeded")["user"] == "alice"
    job_page = visitor.get("/jobs/hello").text
    assert "hello-worker-0" in job_page and "node-" in job_page
    logs = visitor.get("/fragments/jobs/hello/logs", task="hello-worker-0")
    assert log_boxes(logs.text) == {"hello-worker-0": "hello\n"}
    assert logs.headers["X-Phalanx-Final"] == "1"
