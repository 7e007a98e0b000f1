"""The console's pipeline and report pages in a real browser (headless Chromium) against
a real server with the local executor: a cached pipeline run fails at its last step, is
resumed from it with the page's form once the condition is fixed, and the new run's DAG
shows the earlier steps Cached and the last one going from Running to Succeeded without
a reload; a simulator report is shown in a sandboxed frame where its script does not run.

Same rules as ``test_console_browser``: skips without playwright or chromium (fails
under PHALANX_REQUIRE_CHROMIUM=1); screenshots (1280x800) go to
``$PHALANX_CONSOLE_SCREENSHOTS`` (``docs/console`` for the README's), else to the
test's temporary directory; waits are for conditions in the page, with a deadline.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.integration.control.serving import running_server
from tests.integration.control.test_console_browser import (  # noqa: F401  (the fixture)
    _login,
    _screenshot,
    browser,
)
from tests.integration.control.test_pipelines import admin, ended, pipeline, run

#: SQLite only: what a browser draws; test_console_pipelines checks the data on both.
BACKENDS = ("sqlite",)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.browser

#: Three steps, every one cached; validate runs DIR/validate.sh, which the test rewrites.
CACHED = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: train-eval}
spec:
  params: {lr: 0.01}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}, cache: {enabled: true}}
  steps:
    prep:
      command: ["sh", "-c", "echo hello > {{outputs.data}}"]
      outputs: {artifacts: [data]}
    train:
      inputs: {artifacts: {data: "{{steps.prep.outputs.data}}"}}
      command: ["sh", "-c", "tr a-z A-Z < {{inputs.data}} > {{outputs.model}}; echo lr={{params.lr}} >> {{outputs.model}}"]
      outputs: {artifacts: [model]}
    validate:
      inputs: {artifacts: {model: "{{steps.train.outputs.model}}"}}
      command: ["sh", "DIR/validate.sh", "{{inputs.model}}"]
"""
#: Fixed: waits for DIR/go (so that the page sees it running), then checks the model.
FIXED = 'while [ ! -f DIR/go ]; do sleep 0.1; done; grep -q HELLO "$1"\n'
#: A report whose script would say so if it ran.
HOSTILE = (
    '<!doctype html><p id="said">no script ran</p>'
    "<script>document.getElementById('said').textContent = 'script ran';"
    "window.top.document.title = 'pwned';</script>"
)


def box(step: str, phase: str) -> str:
    return f'g.step[data-step="{step}"][data-phase="{phase}"]'


def test_a_resumed_runs_dag_shows_its_cache_hits_and_follows_the_last_step(
    browser: Browser,  # noqa: F811
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "validate.sh").write_text("echo 'model not validated' >&2; exit 1\n")
    with running_server(tmp_path) as server:
        alice = admin(server).user("alice")
        alice.post("/api/v1/pipelines", pipeline(CACHED.replace("DIR", str(work))))
        first = run(alice, "train-eval")
        assert ended(alice, first)["phase"] == "Failed"

        page = _login(browser, server, alice.token, f"/runs/{first}")
        page.wait_for_selector(box("validate", "Failed"))
        assert page.locator("svg.dag line.edge").count() == 2
        (work / "validate.sh").write_text(FIXED.replace("DIR", str(work)))
        page.select_option("#resume-from", "validate")
        page.click("form.resume button[type=submit]")
        page.wait_for_url(f"{server.url}/ui/runs/train-eval-*")
        second = page.url.rsplit("/", 1)[1]
        assert second != first
        page.evaluate("window.notReloaded = true")

        page.wait_for_selector(box("validate", "Running"))
        for step in ("prep", "train"):
            cached = page.locator(box(step, "Cached"))
            assert cached.locator("text.badge").text_content() == "cached"
        assert f"reused from run {first}" in page.locator(".step-details").inner_text()
        (work / "go").touch()
        page.wait_for_selector(box("validate", "Succeeded"))
        page.wait_for_selector('#run-phase:has-text("Succeeded")')
        assert page.evaluate("window.notReloaded") is True  # refreshed in place
        assert alice.get(f"/api/v1/runs/{second}")["resumed_from"] == first
        _screenshot(page, tmp_path, "pipeline-run")


def test_a_report_is_shown_in_a_sandbox_where_its_script_does_not_run(
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    compared: Path,
) -> None:
    folder = tmp_path / "reports"
    shutil.copytree(compared, folder / "fifo-vs-tiresias")
    (folder / "untrusted.html").write_text(HOSTILE)
    with running_server(tmp_path, reports=folder) as server:
        token = server.admin_token or ""
        page = _login(browser, server, token, "/reports")
        page.click('a[href="/ui/reports/untrusted.html"]')
        frame = page.frame_locator("#report")
        frame.locator("#said").wait_for()
        assert frame.locator("#said").inner_text() == "no script ran"
        assert page.title() != "pwned"

        page.click('a[href="/ui/reports/fifo-vs-tiresias"]')
        page.wait_for_selector('#report-name:has-text("fifo-vs-tiresias")')
        chart = page.frame_locator("#report").locator("svg").first
        chart.wait_for()
        chart.scroll_into_view_if_needed()  # the picture shows a chart, not only a table
        _screenshot(page, tmp_path, "reports")
