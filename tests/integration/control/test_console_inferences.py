"""Inference services in the web console of a real server, driven over HTTP as a browser
would: the list (``/ui/inferences``) and a service's page (``/ui/inferences/NAME``) show
a service applied through the API, its predictor (model version, traffic, replica range)
and its replica (its job, linked) once it is Ready; its owner and admins see it, another
user gets the jobs' "not found" for it and does not find it listed; what a tenant wrote
in the document is shown as text, never markup (names are DNS labels, so the document's
values are where markup could come from). Every wait is for a condition, with a deadline.
"""

from __future__ import annotations

import re

from phalanx.control.server import Server
from tests.integration.control.console import Visitor, signed_in
from tests.integration.control.serving import wait_for
from tests.integration.control.test_inference import inference, predictor, trained
from tests.integration.control.test_pipelines import admin

#: An environment value of the service's document that HTML would take for a script.
EVIL = "<script>alert('pwned')</script>"


def _row(page: str, service: str) -> str:
    """The list's row of ``service`` ("" when it is not listed)."""
    found = re.search(rf'<tr[^>]*data-service="{service}">(.*?)</tr>', page, re.S)
    return found.group(1) if found else ""


def test_a_service_and_its_ready_replica_are_shown_to_its_owner_and_admins_only(
    server: Server,
) -> None:
    api = admin(server)
    alice, bob = api.user("alice"), api.user("bob")
    trained(alice, "train-1", "one")
    main = predictor("main", "mnist:v1", minReplicas=1, maxReplicas=2)
    main["env"] = {"NOTE": EVIL}
    alice.post("/api/v1/inferences", inference("mnist", main))

    as_alice = signed_in(server.url, alice.token)
    fragment = wait_for(
        lambda: (
            'data-replica="mnist-main-1" data-ready="true"'
            in (text := as_alice.get("/fragments/inferences/mnist").text)
            and text
        ),
        "replica mnist-main-1 Ready on the service's page",
    )
    assert '<a href="/ui/jobs/mnist-main-1">mnist-main-1</a>' in fragment
    assert '<span class="phase phase-running">Running</span>' in fragment
    (shown,) = re.findall(r'<tr data-predictor="main">(.*?)</tr>', fragment)
    assert re.search(r'<code class="version">mnist:v1@sha256:[0-9a-f]+</code>', shown), shown
    assert '<td class="traffic">100%</td>' in shown and '<td class="range">1..2</td>' in shown
    assert '<td class="ready-count">1 of 1</td>' in shown
    assert 'id="service-ready">Ready<' in fragment
    assert 'id="no-rollouts"' in fragment

    page = as_alice.get("/inferences/mnist")
    assert 'href="/ui/inferences" class="here"' in page.text  # the nav's entry
    assert 'data-refresh="/ui/fragments/inferences/mnist"' in page.text
    assert '<code id="service-url">/serve/mnist/</code>' in page.text
    # the document as YAML text: the tenant's value is escaped, and no script is inline
    (document,) = re.findall(r'<pre class="document" id="document">(.*?)</pre>', page.text, re.S)
    assert "kind: Inference" in document and "modelVersion: mnist:v1@sha256:" in document
    assert "NOTE: &lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in document
    assert EVIL not in page.text and "alert('pwned')" not in page.text
    assert re.findall(r"<script[^>]*>", page.text) == ['<script src="/ui/static/console.js" defer>']
    # the replica's link leads to its job's page
    assert "mnist-main-1" in as_alice.get("/jobs/mnist-main-1").text

    # the list: alice's own services, with the predictor and its Ready replica
    listed = as_alice.get("/inferences").text
    assert "My inference services" in listed
    row = _row(listed, "mnist")
    assert '<a href="/ui/inferences/mnist">mnist</a>' in row and "<td>alice</td>" in row
    assert '<span class="readiness ready">Ready</span>' in row
    assert "<b>main</b> <code>mnist:v1</code> 100%" in row  # the digest on the page only
    assert '<span class="ready-count">1/1 Ready</span>' in row and "1..2" in row
    assert "<code>/serve/mnist/</code>" in row
    # the fragment shows the same row (its age may have ticked on between the reads)
    aged = re.compile(r"<td>\d+[smhd]</td>")
    again = _row(as_alice.get("/fragments/inferences").text, "mnist")
    assert aged.sub("<td>AGE</td>", again) == aged.sub("<td>AGE</td>", row)
    # an admin sees everyone's
    as_admin = signed_in(server.url, api.token)
    everyone = as_admin.get("/inferences").text
    assert "All inference services" in everyone and "<td>alice</td>" in _row(everyone, "mnist")
    assert EVIL not in as_admin.get("/inferences/mnist").text

    # another user: the same "not found" as for another user's job, and nothing listed
    as_bob = signed_in(server.url, bob.token)
    for path in ("/inferences/mnist", "/fragments/inferences/mnist"):
        refused = as_bob.get(path, expect=404).text
        assert "<h1>Not found</h1>" in refused
        assert "no inference named 'mnist'" in refused.replace("&#39;", "'")
        assert "mnist-main-1" not in refused and "NOTE" not in refused
    for path in ("/inferences", "/fragments/inferences"):
        seen = as_bob.get(path).text
        assert "mnist" not in seen and "no inference services" in seen


def test_the_inference_pages_need_a_session(server: Server) -> None:
    visitor = Visitor(server.url)
    for path in ("/inferences", "/inferences/any", "/fragments/inferences"):
        answer = visitor.get(path, expect=303)
        assert answer.headers["location"].startswith("/ui/login?next=")
    refresh = visitor.http.get("/fragments/inferences/any", headers={"X-Phalanx-Refresh": "1"})
    assert refresh.status_code == 401
