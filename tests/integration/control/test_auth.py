"""Tokens, roles, queue ACLs and job visibility through the real server."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
from typer.testing import CliRunner

from phalanx.cli.main import app
from tests.integration.control.serving import Api, role, running_server, wait_for


def test_first_start_writes_a_private_admin_token(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        token_file = tmp_path / "data" / "admin.token"
        assert token_file.read_text().strip() == server.admin_token
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert Api(server.url, server.admin_token or "").get("/api/v1/users/me")["role"] == "admin"


def test_requests_without_a_valid_token_are_refused(tmp_path: Path) -> None:
    with (
        running_server(tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=30) as anonymous,
    ):
        response = anonymous.get("/api/v1/jobs")
        assert response.status_code == 401
        assert response.json()["field"] == "Authorization"
        forged = anonymous.get("/api/v1/jobs", headers={"Authorization": "Bearer phx_forged"})
        assert forged.status_code == 401
        assert anonymous.get("/healthz").json()["status"] == "ok"


def test_queue_acl_refuses_users_it_does_not_name(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        admin = Api(server.url, server.admin_token or "")
        admin.queue("private", submitters=["alice"])
        alice, bob = admin.user("alice"), admin.user("bob")
        alice.submit("mine", "private", role())
        denied = bob.submit("theirs", "private", role(), expect=403)
        assert denied["field"] == "spec.queue"
        assert "bob may not submit to queue private" in denied["detail"]
        assert "submitters" in denied["fix"]


def test_users_see_and_cancel_only_their_own_jobs(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        admin = Api(server.url, server.admin_token or "")
        admin.queue("shared")
        alice, bob = admin.user("alice"), admin.user("bob")
        job = alice.submit("alices-job", "shared", role(command="sleep 30"))
        assert job["user"] == "alice"
        assert bob.get("/api/v1/jobs")["items"] == []
        assert bob.get("/api/v1/jobs/alices-job", expect=404)["field"] == "name"
        bob.post("/api/v1/jobs/alices-job/cancel", expect=404)
        assert bob.http.delete("/api/v1/jobs/alices-job").status_code == 404
        assert [j["name"] for j in alice.get("/api/v1/jobs")["items"]] == ["alices-job"]
        assert [j["name"] for j in admin.get("/api/v1/jobs")["items"]] == ["alices-job"]
        # a user cannot pose as another in the document
        posed = bob.submit("posing", "shared", role(), user="alice")
        assert posed["user"] == "bob"
        alice.post("/api/v1/jobs/alices-job/cancel", expect=200)
        alice.wait_phase("alices-job", "Cancelled")


def test_only_admins_manage_queues_nodes_and_users(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        admin = Api(server.url, server.admin_token or "")
        carol = admin.user("carol")
        document = {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "q"}}
        assert carol.post("/api/v1/queues", document, expect=403)["fix"]
        carol.post("/api/v1/nodes/node-0/cordon", expect=403)
        carol.post("/api/v1/users", {"name": "dave"}, expect=403)
        assert admin.post("/api/v1/nodes/node-0/cordon", expect=200)["cordoned"] is True
        revoked = admin.user("erin")
        assert admin.http.delete("/api/v1/users/erin").status_code == 204
        assert revoked.http.get("/api/v1/jobs").status_code == 401


def test_a_job_name_taken_by_another_user_is_not_revealed_as_theirs(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        admin = Api(server.url, server.admin_token or "")
        admin.queue("shared")
        alice, bob = admin.user("alice"), admin.user("bob")
        alice.submit("acquisition-x", "shared", role())
        refused = bob.submit("acquisition-x", "shared", role(), expect=409)
        assert refused["detail"] == "the job name 'acquisition-x' is not available"
        assert refused["field"] == "metadata.name"
        assert "unique across all users" in refused["fix"] and "bob-" in refused["fix"]
        assert "alice" not in str(refused) and "exists" not in str(refused)
        own = alice.submit("acquisition-x", "shared", role(), expect=409)
        assert own["detail"] == "you already have a job named 'acquisition-x'"
        assert "delete the old job" in own["fix"]


def test_two_users_jobs_may_make_the_same_task_name(tmp_path: Path) -> None:
    """Job a-b's role c and job a's role b-c both make task a-b-c-0."""
    with running_server(tmp_path) as server:
        admin = Api(server.url, server.admin_token or "")
        admin.queue("shared")
        alice, bob = admin.user("alice"), admin.user("bob")
        alice.submit("a-b", "shared", role("c", command="echo alice"))
        bob.submit("a", "shared", role("b-c", command="echo bob"))
        for user, job in ((alice, "a-b"), (bob, "a")):
            finished = user.wait_phase(job, "Succeeded")
            assert [t["name"] for t in finished["tasks"]] == ["a-b-c-0"]
            log = user.http.get(f"/api/v1/jobs/{job}/logs").text
            assert log == f"{user.get('/api/v1/users/me')['name']}\n"


def test_node_views_name_only_the_callers_own_tasks(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        admin = Api(server.url, server.admin_token or "")
        admin.queue("shared")
        alice, bob = admin.user("alice"), admin.user("bob")
        alice.submit("alices-secret", "shared", role(command="sleep 30", gpu=1))
        bob.submit("bobs-job", "shared", role(command="sleep 30", gpu=1))
        alice.wait_phase("alices-secret", "Running")
        bob.wait_phase("bobs-job", "Running")

        def cards(api: Api) -> list[tuple[str, list[str], int]]:
            return [
                (node["name"], gpu["tasks"], gpu["other_tasks"])
                for node in api.get("/api/v1/nodes")
                for gpu in node["gpus"]
                if gpu["tasks"] or gpu["other_tasks"]
            ]

        # the nodes' view is published by the controller's tick: wait for both tasks in it
        everyone = wait_for(lambda: len(cards(admin)) == 2 and cards(admin), "both tasks placed")
        assert sorted(t for _, tasks, _ in everyone for t in tasks) == [
            "alices-secret-worker-0",
            "bobs-job-worker-0",
        ]
        assert all(others == 0 for _, _, others in everyone)
        seen_by_bob = cards(bob)
        assert sorted((tasks, others) for _, tasks, others in seen_by_bob) == [
            ([], 1),
            (["bobs-job-worker-0"], 0),
        ]
        assert "alices" not in str(bob.get("/api/v1/nodes"))
        (alices_node,) = [
            node for node, tasks, _ in everyone if tasks == ["alices-secret-worker-0"]
        ]
        one = bob.get(f"/api/v1/nodes/{alices_node}")
        assert "alices" not in str(one)
        assert sum(gpu["other_tasks"] for gpu in one["gpus"]) == 1
        assert one["tasks"] >= 1  # how many tasks a node holds is no secret

        token = bob.http.headers["Authorization"].removeprefix("Bearer ")
        described = CliRunner().invoke(
            app, ["--server", server.url, "--token", token, "describe", "node", alices_node]
        )
        assert described.exit_code == 0, described.output
        assert "1 of other users" in described.stdout and "alices" not in described.stdout


def test_metrics_need_the_metrics_token_or_an_admins(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "metrics.token").write_text("phm_kept-from-an-earlier-start\n")
    with (
        running_server(tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=30) as anonymous,
    ):
        admin = Api(server.url, server.admin_token or "")
        carol = admin.user("carol")
        refused = anonymous.get("/metrics")
        assert refused.status_code == 401
        assert "metrics.token" in refused.json()["fix"]
        assert "credentials_file" in refused.json()["fix"]
        assert carol.http.get("/metrics").status_code == 403
        assert "phalanx_jobs" in admin.http.get("/metrics").text
        token_file = data / "metrics.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        scraper = {"Authorization": "Bearer phm_kept-from-an-earlier-start"}
        scraped = anonymous.get("/metrics", headers=scraper)
        assert scraped.status_code == 200 and "phalanx_jobs" in scraped.text
        assert scraped.headers["content-type"].startswith("text/plain")
        # the metrics token grants nothing else
        assert anonymous.get("/api/v1/jobs", headers=scraper).status_code == 401
        assert anonymous.get("/api/v1/nodes", headers=scraper).status_code == 401
        assert anonymous.get("/healthz").status_code == 200


def test_a_fresh_data_dir_gets_a_private_metrics_token(tmp_path: Path) -> None:
    with (
        running_server(tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=30) as anonymous,
    ):
        token = (tmp_path / "data" / "metrics.token").read_text().strip()
        assert token.startswith("phm_") and token == server.metrics_token
        scraped = anonymous.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert scraped.status_code == 200
