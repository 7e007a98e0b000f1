"""The console's usage page (``/ui/usage``) of a real server, driven over HTTP as a
browser would: after jobs of two users ran, each user's page lists their own jobs only,
with the hours and cost the API reports (a short job's hours are not rounded to 0);
an admin's lists every user, and their total; a period or grouping the API refuses is a
readable message above the form that keeps what was typed (never a traceback); asking
for another user's usage as a non-admin says it is an admin's right."""

from __future__ import annotations

import html
import re
from typing import Any

from phalanx.control.server import Server
from phalanx.web.views.usage import figure
from tests.integration.control.console import signed_in
from tests.integration.control.serving import Api, role

#: SQLite only: the page shows the API's report; test_usage checks the ledger's queries
#: (and the report's figures) on both stores.
BACKENDS = ("sqlite",)

FIGURES = ("gpu-hours", "cpu-hours", "memory-gib-hours", "cost", "saved")
FIELDS = ("gpu_hours", "cpu_hours", "memory_gib_hours", "cost", "saved")


def rows(page: str) -> dict[str, dict[str, str]]:
    """The usage table's rows by key (the total's too), each cell by its class."""
    table = re.search(r'<table class="usage" id="usage">(.*?)</table>', page, re.S)
    assert table is not None, page[:3000]
    found = {}
    for key, body in re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', table.group(1), re.S):
        cells = re.findall(r'<td class="(?:n )?([a-z-]+)">([^<]*)</td>', body)
        found[html.unescape(key)] = {name: html.unescape(text) for name, text in cells}
    return found


def shown(row: dict[str, Any]) -> dict[str, str]:
    """An API row's figures as the page writes them."""
    return {cell: figure(row[field]) for cell, field in zip(FIGURES, FIELDS, strict=True)}


def problem(page: str) -> str:
    """The page's error box, as text."""
    box = re.search(
        r'<div class="field-error" id="usage-error" role="alert">(.*?)</div>', page, re.S
    )
    assert box is not None, page[:3000]
    return html.unescape(re.sub(r"<[^>]+>", "", box.group(1)))


def test_the_usage_page_shows_each_user_their_own_usage_and_an_admin_everyones(
    server: Server,
) -> None:
    admin = Api(server.url, server.admin_token or "")
    admin.queue("team")
    alice, bob = admin.user("alice"), admin.user("bob")
    alice.submit("train", "team", role(replicas=2, command="sleep 1", gpu=1))
    bob.submit("eval", "team", role(command="sleep 1", gpu=2))
    alice.wait_phase("train", "Succeeded")
    bob.wait_phase("eval", "Succeeded")

    as_alice = signed_in(server.url, alice.token)
    page = as_alice.get("/usage").text
    assert 'href="/ui/usage" class="here"' in page  # the nav's entry
    assert "My usage" in page and 'value="7d"' in page  # the last 7 days by default
    assert "Traceback" not in page
    report = alice.get("/api/v1/usage", since="7d", by="job")
    listed = rows(page)
    assert set(listed) == {"train", "total"}  # bob's job is not alice's to see
    assert listed["train"]["queue"] == "team" and listed["train"]["allocations"] == "2"
    (train,) = report["items"]
    assert {k: listed["train"][k] for k in FIGURES} == shown(train)
    assert train["gpu_hours"] > 0 and listed["train"]["gpu-hours"] not in ("0", "0.00")
    assert {k: listed["total"][k] for k in FIGURES} == shown(report["total"])

    by_user = rows(as_alice.get("/usage", by="user").text)
    assert set(by_user) == {"alice", "total"}
    # another user's usage is an admin's to see: the API's refusal, on the page
    refused = as_alice.get("/usage", expect=403, user="bob").text
    assert "only an admin may see another user's usage" in problem(refused)
    assert 'id="usage"' not in refused and "Traceback" not in refused

    as_admin = signed_in(server.url, admin.token)
    page = as_admin.get("/usage").text  # an admin's rows are per user by default
    assert "Usage of all users" in page
    everyone = admin.get("/api/v1/usage", since="7d", by="user")
    listed = rows(page)
    assert set(listed) == {"alice", "bob", "total"}
    for row in everyone["items"]:
        assert {k: listed[row["key"]][k] for k in FIGURES} == shown(row)
    assert {k: listed["total"][k] for k in FIGURES} == shown(everyone["total"])
    assert float(listed["bob"]["gpu-hours"]) > 0
    by_job = rows(as_admin.get("/usage", by="job", since="").text)  # since the beginning
    assert by_job["eval"]["user"] == "bob" and by_job["train"]["user"] == "alice"
    only_bob = rows(as_admin.get("/usage", by="queue", user="bob").text)
    assert set(only_bob) == {"team", "total"}
    assert only_bob["team"]["gpu-hours"] == figure(
        admin.get("/api/v1/usage", since="7d", by="queue", user="bob")["total"]["gpu_hours"]
    )
    # a period before the jobs ran: nothing held, and the table says so
    old = as_admin.get("/usage", since="2020-01-01", until="2020-01-02").text
    assert set(rows(old)) == {"total"} and "nothing held in this period" in old


def test_a_period_or_grouping_the_api_refuses_is_a_readable_message(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    bob = admin.user("bob")
    as_bob = signed_in(server.url, bob.token)

    page = as_bob.get("/usage", expect=422, since="yesterday").text
    said = problem(page)
    assert "since" in said and "'yesterday' is not a time" in said and "7d" in said, said
    assert 'value="yesterday"' in page and 'aria-invalid="true"' in page  # kept, marked
    assert "Traceback" not in page and 'id="usage"' not in page

    page = as_bob.get("/usage", expect=422, since="2025-02-01", until="2025-01-01").text
    assert "until is not after since" in problem(page)

    page = as_bob.get("/usage", expect=422, by="node").text
    assert "'node' is not a grouping" in problem(page) and "user, queue, job" in problem(page)
