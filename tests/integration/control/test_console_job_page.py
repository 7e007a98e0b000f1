"""A job's page in the console, on a real server (issue 37, the second hour): the log of
every task shows the end of each task in a box of its own, in the job's order; a job
that waits says that no task has started and why, and that it has no events yet; a log
with nothing to show says so. ``/`` leads to the console; the API's unknown paths still
answer 404 in the API's JSON shape.
"""

from __future__ import annotations

import re

import httpx
from markupsafe import escape

from phalanx.control.server import Server
from tests.integration.control.console import log_boxes, signed_in
from tests.integration.control.serving import Api, role, wait_for

#: Each task prints 3,000 numbered lines (about 45 KiB: more than its share of the page)
#: and a last one that HTML would take for markup.
CHATTY = (
    "import os; i = os.environ['PHALANX_INDEX']; "
    "[print(f'task {i} line {n}') for n in range(3000)]; print(f'<b>task {i} done</b>')"
)


def test_every_task_shows_the_end_of_its_own_log_in_a_box_of_its_own(server: Server) -> None:
    token = server.admin_token
    assert token is not None
    admin = Api(server.url, token)
    admin.queue("default", deserved={"cpu": 8000})
    admin.submit("chatty", "default", role(replicas=3, command=["python", "-c", CHATTY]))
    admin.wait_phase("chatty", "Succeeded")
    visitor = signed_in(server.url, token)
    fragment = visitor.get("/fragments/jobs/chatty/logs")
    assert fragment.headers["X-Phalanx-Final"] == "1"
    boxes = log_boxes(fragment.text)
    assert list(boxes) == [f"chatty-worker-{i}" for i in range(3)]  # the job's order
    for i, text in enumerate(boxes.values()):
        # each box holds its task's last lines, whatever the other tasks wrote after
        assert text.endswith(f"task {i} line 2999\n<b>task {i} done</b>\n"), text[-200:]
        assert not text.startswith(f"task {i} line 0\n")  # the end of it only
        assert f"task {i} line 2500\n" in text
    # what the task wrote is text, never markup
    assert "&lt;b&gt;task 2 done&lt;/b&gt;" in fragment.text and "<b>task" not in fragment.text
    # the page itself shows the same boxes, before any script runs
    page = visitor.get("/jobs/chatty").text
    assert list(log_boxes(page)) == list(boxes)
    assert '<span id="log-state" class="hint">the job has ended</span>' in page
    # one task alone, and a stream nothing was written to
    one = log_boxes(visitor.get("/fragments/jobs/chatty/logs", task="chatty-worker-1").text)
    assert list(one) == ["chatty-worker-1"] and one["chatty-worker-1"].startswith("task 1 line 0\n")
    silent = visitor.get("/fragments/jobs/chatty/logs", stream="stderr").text
    assert log_boxes(silent) == {} and "No task wrote to stderr." in silent
    unknown = visitor.get("/fragments/jobs/chatty/logs", task="chatty-worker-9").text
    assert "job chatty has no task &#39;chatty-worker-9&#39;" in unknown


def test_a_waiting_job_says_no_task_has_started_why_it_waits_and_that_it_has_no_events(
    server: Server,
) -> None:
    token = server.admin_token
    assert token is not None
    admin = Api(server.url, token)
    # a queue at its capability: the job is not even admitted (Pending, no event yet)
    admin.queue("capped", capability={"gpu": 4})
    admin.submit("hog", "capped", role(replicas=2, gpu=2, command=["sleep", "600"]))
    admin.wait_phase("hog", "Running")
    admin.submit("late", "capped", role(gpu=1, command=["echo", "never"]))
    why = _wait_reason(admin, "late")
    visitor = signed_in(server.url, token)
    fragment = visitor.get("/fragments/jobs/late/logs")
    assert "X-Phalanx-Final" not in fragment.headers
    assert log_boxes(fragment.text) == {}
    assert 'data-label="waiting for a task to start"' in fragment.text
    said = re.search(r'<p class="log-empty" id="log-empty">(.*?)</p>', fragment.text, re.S)
    assert said is not None, fragment.text
    assert said.group(1).startswith("No task has started; the log appears when one does.")
    assert f"The job waits: {escape(why)}" in said.group(1)
    one = visitor.get("/fragments/jobs/late/logs", task="late-worker-0").text
    assert "Task late-worker-0 has not started; its log appears when it does." in one
    page = visitor.get("/jobs/late").text
    assert '<span id="log-state" class="hint">waiting for a task to start</span>' in page
    assert "No task has started; the log appears when one does." in page
    assert admin.job("late")["phase"] == "Pending" and admin.get("/api/v1/jobs/late/events") == []
    events = visitor.get("/fragments/jobs/late").text
    assert 'id="no-events">no events yet: the job has not been placed</td>' in events


def test_the_root_leads_to_the_console_and_unknown_api_paths_stay_json(server: Server) -> None:
    with httpx.Client(base_url=server.url, follow_redirects=False, timeout=30) as http:
        root = http.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/ui"
        assert http.head("/").status_code == 307
        landed = http.get("/", follow_redirects=True)
        assert landed.status_code == 200 and str(landed.url).startswith(f"{server.url}/ui/login")
        for path in ("/api/v1/nothing", "/api", "/nothing"):
            missing = http.get(path)
            assert missing.status_code == 404, path
            assert missing.headers["content-type"] == "application/json", path
            assert missing.json()["fix"].startswith(f"check the path {path!r}")
        assert "/" not in http.get("/openapi.json").json()["paths"]


def _wait_reason(admin: Api, name: str) -> str:
    """The scheduler's reason job ``name`` waits, once it has given one."""
    job = wait_for(
        lambda: (j := admin.job(name))["phase"] in ("Pending", "Queued") and j["message"] and j,
        f"a reason why {name} waits",
    )
    return str(job["message"])
