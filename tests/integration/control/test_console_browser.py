"""The web console in a real browser (headless Chromium) against a real server with the
local executor: an admin sees the queue bars change when a job starts, without a
reload; an engineer sees the field error of a malformed document, submits a good one
and follows its log as it is written; another user sees nothing of it, by list or URL.

Needs the ``playwright`` package and Debian's ``chromium``: skips with the reason where
either is absent, and fails instead under PHALANX_REQUIRE_CHROMIUM=1 (CI). Each test
saves a screenshot (1280x800) of its view into ``$PHALANX_CONSOLE_SCREENSHOTS`` (the
README's are made with ``PHALANX_CONSOLE_SCREENSHOTS=docs/console``), else into its
temporary directory. Waits are for conditions in the page, with a generous deadline.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from phalanx.control.server import Server
from tests.browser import chromium
from tests.integration.control.console import good_job
from tests.integration.control.serving import DEADLINE, Api, role, running_server

#: SQLite only: what a browser draws; test_console checks the same pages' data on both.
BACKENDS = ("sqlite",)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

#: Milliseconds a page has to show what is awaited (the server ticks every 0.2 s).
WAIT_MS = int(DEADLINE * 1000)

#: Two racks of two 4-GPU nodes: the heatmap groups them by their ``tor`` label.
RACKS = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: lab}
spec:
  nodeGroups:
  - name: rack-a
    count: 2
    resources: {cpu: 8, memory: 32Gi}
    gpus: {count: 4, model: virtual, memory: 16Gi}
    labels: {tor: tor-a}
  - name: rack-b
    count: 2
    resources: {cpu: 8, memory: 32Gi}
    gpus: {count: 4, model: virtual, memory: 16Gi}
    labels: {tor: tor-b}
"""


@pytest.fixture
def browser() -> Iterator[Browser]:
    executable = chromium("the console's browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def _screenshot(page: Page, tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get("PHALANX_CONSOLE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 0
    return path


def _login(browser: Browser, server: Server, token: str, path: str) -> Page:
    """A new page of a new browser context, logged in with ``token``, at ``path``."""
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{server.url}/ui{path}")
    assert "/ui/login" in page.url  # no session yet
    page.fill("#token", token)
    page.click("form.login button[type=submit]")
    page.wait_for_url(f"{server.url}/ui{path}")
    assert token not in page.url and token not in page.content()
    page.evaluate("window.notReloaded = true")  # gone if the page is ever reloaded
    return page


def test_an_admin_sees_the_queue_bars_change_when_a_job_starts(
    browser: Browser, tmp_path: Path
) -> None:
    with running_server(tmp_path, cluster=RACKS) as server:
        token = server.admin_token
        assert token is not None
        api = Api(server.url, token)
        api.queue("research", deserved={"gpu": 8, "cpu": 16000}, capability={"gpu": 12})
        api.queue("nlp", parent="research", deserved={"gpu": 4, "cpu": 8000})
        api.queue("vision", parent="research", deserved={"gpu": 4, "cpu": 8000})
        api.queue("batch", deserved={"gpu": 8, "cpu": 16000})
        alice = api.user("alice")
        alice.submit("warmup", "vision", role(gpu=1, command=["sleep", "600"]))
        alice.wait_phase("warmup", "Running")
        page = _login(browser, server, token, "/admin")
        bar = page.locator('tr[data-queue="nlp"] .bar-row[data-resource="gpu"]')
        assert bar.get_attribute("data-allocated") == "0.0"
        api.submit("bert", "nlp", role(replicas=2, gpu=3, command=["sleep", "600"]))
        alice.submit("too-big", "vision", role(gpu=6, command=["true"]))
        page.wait_for_selector(
            'tr[data-queue="nlp"] .bar-row[data-resource="gpu"][data-allocated="6.0"]'
        )
        page.wait_for_selector('.waiting td:has-text("too-big")')
        # warmup's GPU and bert's two tasks' three each
        assert page.locator(".node-row .cell.allocated").count() == 7
        assert page.locator(".domain h3").all_inner_texts() == [
            "network domain tor-a",
            "network domain tor-b",
        ]
        assert page.evaluate("window.notReloaded") is True
        _screenshot(page, tmp_path, "admin")


def test_the_admin_charts_render_and_update_without_a_reload(
    browser: Browser, tmp_path: Path
) -> None:
    with running_server(tmp_path, cluster=RACKS) as server:
        token = server.admin_token
        assert token is not None
        api = Api(server.url, token)
        api.queue("batch", deserved={"gpu": 8})
        page = _login(browser, server, token, "/admin")
        started = page.locator('figure.chart[data-series="started"]')
        before = float(started.get_attribute("data-total") or "0")
        assert page.locator("figure.chart svg.spark").count() == 6
        api.submit("one", "batch", role(gpu=1, command=["sleep", "600"]))
        page.wait_for_function(
            """(before) => {
                const chart = document.querySelector('figure.chart[data-series="started"]');
                return Number(chart.dataset.total) > before && chart.querySelector("polyline");
            }""",
            arg=before,
        )
        ratio = page.locator('figure.chart[data-series="gpu-ratio"] polyline')
        assert ratio.count() >= 1
        assert page.evaluate("window.notReloaded") is True


def test_an_engineer_sees_the_field_error_then_follows_the_log_of_a_good_job(
    browser: Browser, server: Server, tmp_path: Path
) -> None:
    token = server.admin_token
    assert token is not None
    api = Api(server.url, token)
    api.queue("default", deserved={"cpu": 8000})
    alice = api.user("alice")
    page = _login(browser, server, alice.token, "/submit")
    page.fill("#document", good_job("train").replace("replicas: 1", "replicaz: 1"))
    page.click("form.submit button[type=submit]")
    error = page.locator("#document-error")
    error.wait_for()
    assert page.locator("#error-field").inner_text() == "spec.roles[0].replicaz"
    assert "spec.roles[0].replicaz: unknown field" in error.inner_text()
    _screenshot(page, tmp_path, "submit-error")

    go = tmp_path / "go"
    script = (
        "import os, time; print('step 1', flush=True); "
        f"[time.sleep(0.05) for _ in iter(lambda: os.path.exists({str(go)!r}), True)]; "
        "print('step 2', flush=True)"
    )
    page.fill("#document", _with_command(good_job("train"), script))
    page.click("form.submit button[type=submit]")
    page.wait_for_url(f"{server.url}/ui/jobs/train")
    page.evaluate("window.notReloaded = true")
    box = "#log section[data-task='train-worker-0'] pre"
    page.wait_for_function(
        f"() => (document.querySelector({box!r}) || {{}}).textContent === 'step 1\\n'"
    )
    assert page.locator("#log-state").inner_text() == "following"
    go.touch()  # the task may go on: its next line must appear in the page as it is written
    page.wait_for_function(
        f"() => (document.querySelector({box!r}) || {{}}).textContent === 'step 1\\nstep 2\\n'"
    )
    page.wait_for_selector("#job-phase:has-text('Succeeded')")
    page.wait_for_selector("#log-state:has-text('the job has ended')")
    assert page.evaluate("window.notReloaded") is True
    page.select_option("#log-task", "train-worker-0")
    page.wait_for_function(
        "() => (document.querySelector(\"#log > .log-body > pre[data-task='train-worker-0']\")"
        " || {}).textContent === 'step 1\\nstep 2\\n'"
    )
    _screenshot(page, tmp_path, "job")


def test_the_log_of_every_task_shows_the_end_of_each_and_a_waiting_job_says_why(
    browser: Browser, server: Server, tmp_path: Path
) -> None:
    token = server.admin_token
    assert token is not None
    api = Api(server.url, token)
    api.queue("default", capability={"gpu": 4})
    script = "[print(f'line {n}') for n in range(400)]; print('the end')"
    api.submit("gang", "default", role(replicas=3, command=["python", "-c", script]))
    api.wait_phase("gang", "Succeeded")
    page = _login(browser, server, token, "/jobs/gang")
    page.wait_for_selector("#log-state:has-text('the job has ended')")
    # each task's box is scrolled to its own end: every task's last line is in view (the
    # box scrolls once its text is laid out, a frame after the text arrives)
    page.wait_for_function(
        """() => [...document.querySelectorAll("#log pre[data-task]")].every(
            (pre) => pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4)""",
        timeout=10_000,
    )
    ends = page.evaluate(
        """() => [...document.querySelectorAll("#log pre[data-task]")].map((pre) => [
            pre.dataset.task,
            pre.scrollHeight > pre.clientHeight,
            pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4,
            pre.textContent.endsWith("line 399\\nthe end\\n"),
        ])"""
    )
    assert ends == [[f"gang-worker-{i}", True, True, True] for i in range(3)]
    # a job that waits: no log box, but why there is none
    api.submit("hog", "default", role(gpu=4, command=["sleep", "600"]))
    api.wait_phase("hog", "Running")
    api.submit("late", "default", role(gpu=1, command=["true"]))
    page.goto(f"{server.url}/ui/jobs/late")
    page.wait_for_selector("#log-empty:has-text('The job waits: ')")
    assert (
        page.locator("#log-empty")
        .inner_text()
        .startswith("No task has started; the log appears when one does.")
    )
    assert page.locator("#log-state").inner_text() == "waiting for a task to start"
    assert page.locator("#no-events").inner_text() == "no events yet: the job has not been placed"
    assert page.locator("#log pre").count() == 0


def _with_command(document: str, script: str) -> str:
    """``document`` whose task runs ``python -c script`` (a YAML block scalar)."""
    head, _, _ = document.partition("    command:")
    return head + "    command:\n    - python\n    - -c\n    - |\n      " + script + "\n"


def test_another_user_cannot_see_the_job_by_list_or_by_url(
    browser: Browser, server: Server, tmp_path: Path
) -> None:
    token = server.admin_token
    assert token is not None
    api = Api(server.url, token)
    api.queue("default", deserved={"cpu": 8000})
    alice, bob = api.user("alice"), api.user("bob")
    alice.submit("alice-secret", "default", role(command=["python", "-c", "print('s3cr3t')"]))
    alice.wait_phase("alice-secret", "Succeeded")
    bob.submit("bob-job", "default", role(command=["true"]))
    page = _login(browser, server, bob.token, "/jobs?ended=true")
    page.wait_for_selector('a:has-text("bob-job")')
    assert "alice-secret" not in page.content()
    answer = page.goto(f"{server.url}/ui/jobs/alice-secret")
    assert answer is not None and answer.status == 404
    assert "no job named 'alice-secret'" in page.locator("#message").inner_text()
    assert "s3cr3t" not in page.content()
    answer = page.goto(f"{server.url}/ui/fragments/jobs/alice-secret/logs")
    assert answer is not None and answer.status == 404
    assert "s3cr3t" not in page.content()
    answer = page.goto(f"{server.url}/ui/admin")
    assert answer is not None and answer.status == 403
    page.goto(f"{server.url}/ui/jobs/alice-secret")
    _screenshot(page, tmp_path, "other-user")
