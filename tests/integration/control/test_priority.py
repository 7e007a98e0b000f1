"""Each waiting job's multifactor priority through a real server (phalanx-default has
the fairshare plugin): a user who has used the queue waits behind one who has not, and
the API, ``phalanx priority``, ``describe job`` and the console's job page all show the
factors; a user sees only their own jobs."""

from __future__ import annotations

import json

from phalanx.control.server import Server
from tests.integration.control.console import signed_in
from tests.integration.control.serving import Api, role, wait_for
from tests.integration.control.test_cli import ok, phalanx


def test_a_light_users_job_ranks_first_with_a_higher_fair_share(server: Server) -> None:
    token = server.admin_token
    assert token is not None
    admin = Api(server.url, token)
    admin.queue("fs")
    alice, bob = admin.user("alice"), admin.user("bob")
    alice.submit("used", "fs", role(command="sleep 0.3", gpu=4))  # alice's usage ...
    alice.wait_phase("used", "Succeeded")
    alice.submit("hold", "fs", role(replicas=2, command="sleep 600", gpu=4))  # ... and more
    alice.wait_phase("hold", "Running")
    alice.submit("a-wait", "fs", role(command="true", gpu=1))
    bob.submit("b-wait", "fs", role(command="true", gpu=1))

    listed = wait_for(
        lambda: len((found := admin.get("/api/v1/priority"))["items"]) == 2 and found,
        "both waiting jobs ranked",
    )
    assert listed["fairshare"] is True
    first, second = listed["items"]
    assert (first["name"], first["user"], second["name"]) == ("b-wait", "bob", "a-wait")
    assert first["factors"]["fair_share"] == 1.0  # bob has used nothing
    assert second["factors"]["fair_share"] < 1.0
    assert first["total"] > second["total"]
    assert first["weights"] == {"age": 1.0, "fair_share": 1.0, "size": 0.0, "priority": 0.0}
    assert admin.job("b-wait")["priority"]["factors"]["fair_share"] == 1.0
    assert admin.job("hold")["priority"] is None  # running: no factors

    table = ok(phalanx(server, "priority"))
    assert table.split()[:8] == [
        "JOB",
        "USER",
        "QUEUE",
        "PRIORITY",
        "AGE",
        "FAIRSHARE",
        "SIZE",
        "CLASS",
    ]
    assert table.index("b-wait") < table.index("a-wait")
    assert "hold" not in table
    assert "x1" in ok(phalanx(server, "priority", "-o", "wide"))
    dumped = json.loads(ok(phalanx(server, "priority", "--queue", "fs", "-o", "json")))
    assert [j["name"] for j in dumped["items"]] == ["b-wait", "a-wait"]
    assert dumped["items"][0]["factors"]["fair_share"] == 1.0
    described = " ".join(ok(phalanx(server, "describe", "job", "b-wait")).split())
    assert "Priority: " in described and "fair-share 1.00 x1, size " in described
    assert "Priority:" not in ok(phalanx(server, "describe", "job", "hold"))
    page = signed_in(server.url, token).get("/jobs/b-wait").text
    assert 'id="job-priority"' in page and "fair-share 1.00 x1" in page

    # a user sees their own jobs only, whatever user they ask for
    mine = bob.get("/api/v1/priority", user="alice")
    assert [j["name"] for j in mine["items"]] == ["b-wait"]
    theirs = ok(phalanx(server, "priority", token=bob.token))
    assert "b-wait" in theirs and "a-wait" not in theirs
    only = admin.get("/api/v1/priority", user="alice")
    assert [j["name"] for j in only["items"]] == ["a-wait"]
    assert admin.get("/api/v1/priority", queue="elsewhere")["items"] == []
