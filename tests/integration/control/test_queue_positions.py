"""A waiting job's place in its queue's line, through a real server: the API, the CLI
and the console page all show the place the last scheduling session gave it, and a job
moves up when the one ahead of it leaves."""

from __future__ import annotations

from phalanx.control.server import Server
from tests.integration.control.console import signed_in
from tests.integration.control.serving import Api, role, wait_for
from tests.integration.control.test_cli import ok, phalanx


def _row(listing: str, job: str) -> list[str]:
    """The cells of ``job``'s row in ``phalanx get jobs``."""
    return next(line.split() for line in listing.splitlines() if line.startswith(job + " "))


def test_waiting_jobs_show_their_place_in_line_and_move_up(server: Server) -> None:
    token = server.admin_token
    assert token is not None
    api = Api(server.url, token)
    api.queue("team", capability={"gpu": 4})  # room for one of these jobs at a time
    for name in ("first", "second", "third"):
        api.submit(name, "team", role(command="sleep 600", gpu=4))
    assert api.wait_phase("first", "Running")["queue_position"] is None
    wait_for(lambda: api.job("third")["queue_position"] == 2, "third second in line")
    assert api.job("second")["queue_position"] == 1
    listed = {job["name"]: job["queue_position"] for job in api.get("/api/v1/jobs")["items"]}
    assert listed == {"first": None, "second": 1, "third": 2}

    listing = ok(phalanx(server, "get", "jobs"))
    assert _row(listing, "second")[3:5] in (["Pending", "1"], ["Queued", "1"])
    assert _row(listing, "third")[4] == "2"
    assert _row(listing, "first")[3:5] == ["Running", "-"]
    assert "Position:" in ok(phalanx(server, "describe", "job", "third"))
    assert "2 in queue team" in ok(phalanx(server, "describe", "job", "third"))
    assert "Position:" not in ok(phalanx(server, "describe", "job", "first"))

    visitor = signed_in(server.url, token)
    assert '<dd id="job-position">2 in queue team' in visitor.get("/jobs/third").text
    assert 'id="job-position"' not in visitor.get("/jobs/first").text
    listed_page = visitor.get("/fragments/jobs").text
    assert '<td class="position">#1</td>' in listed_page
    assert '<td class="position">#2</td>' in listed_page

    api.post("/api/v1/jobs/first/cancel", expect=200)
    api.wait_phase("first", "Cancelled")
    assert api.wait_phase("second", "Running")["queue_position"] is None
    wait_for(lambda: api.job("third")["queue_position"] == 1, "third first in line")
    assert '<dd id="job-position">1 in queue team' in visitor.get("/jobs/third").text
    assert "1 in queue team" in ok(phalanx(server, "describe", "job", "third"))
