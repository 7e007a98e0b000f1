"""The console's GPUs page (``/ui/gpus``) and a job page's GPU use, on a real server whose
one node's eight H100s are read through a recorded NVML (``telemetry.recorded``) every
0.2 s: while a user's one-GPU job runs on a card made busy, the grid shows that card
coloured by its utilisation with the job's task by name to its owner and as a count to
another user; a card an admin cordoned (``Client.cordon_gpu``, as ``phalanx cordon NODE
--gpu N`` calls it) is shown cordoned with the admin's reason; the job page gives the
summary line and the chart from the job's windows. In a real browser (headless
Chromium; skipped with the reason where it is absent, failing under
``PHALANX_REQUIRE_CHROMIUM=1``) the page renders the grid in its colours and follows a
change of utilisation without a reload, and the job page draws its chart; screenshots
go to ``$PHALANX_CONSOLE_SCREENSHOTS`` (else the test's temporary directory).
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from phalanx.client import Client
from phalanx.control.server import Server
from phalanx.telemetry.recorded import RecordedNvml
from phalanx.web.gpu_grid import heat
from tests.browser import chromium
from tests.integration.control.console import Visitor, signed_in
from tests.integration.control.serving import (
    DEADLINE,
    DGX,
    DGX_NODE,
    Api,
    role,
    running_server,
    wait_for,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

#: SQLite only: the pages show the API's views, whose store is tested on both elsewhere.
BACKENDS = ("sqlite",)

NODE = DGX_NODE
MIB = 1 << 20
#: What the busy card reads: percent busy and MiB used.
BUSY, USED_MIB = 93, 40_000
REASON = "fan failing: replace before use"


def cell(page: str, gpu: int) -> str:
    """Card ``gpu``'s cell of node ``NODE`` on a GPUs page or fragment ("" if absent)."""
    row = page.partition(f'<div class="gpu-row" data-node="{NODE}"')[2]
    for part in row.split('<div class="gpu-cell ')[1:]:
        if f'data-gpu="{gpu}"' in part.split(">", 1)[0]:
            return part
    return ""


def title(part: str) -> str:
    found = re.search(r'title="([^"]*)"', part)
    assert found is not None, part
    return html.unescape(found.group(1))


@pytest.fixture
def nvml() -> RecordedNvml:
    return RecordedNvml.load("h100-sxm-8")


@pytest.fixture
def dgx(tmp_path: Path, nvml: RecordedNvml) -> Iterator[Server]:
    with running_server(tmp_path, cluster=DGX, nvml=nvml, gpu_interval=0.2) as server:
        yield server


def start_busy_job(server: Server, nvml: RecordedNvml) -> tuple[Api, Api, int, int]:
    """Admin's and alice's APIs, the card of alice's running job ``train`` (busy in the
    recording from before the job starts, so that every reading of it is: the others go
    back to idle once it runs) and another card, cordoned by the admin."""
    admin = Api(server.url, server.admin_token or "")
    admin.queue("team")
    alice = admin.user("alice")
    for index in range(8):
        nvml.set(index, utilisation=BUSY, memory_used=USED_MIB * MIB)
    alice.submit("train", "team", role(gpu=1, command=["sleep", "600"]))
    job = alice.wait_phase("train", "Running")
    (task,) = job["tasks"]
    (card,) = task["gpus"]
    for index in range(8):
        if index != card:
            nvml.set(index, utilisation=0, memory_used=552 * MIB)
    other = (card + 3) % 8
    with Client(server.url, admin.token) as client:
        cordon = client.cordon_gpu(NODE, other, REASON)
    assert (cordon.source, cordon.reason) == ("admin", REASON)
    return admin, alice, card, other


def wait_grid(visitor: Visitor, card: int, other: int) -> str:
    """The GPUs fragment once it shows ``card`` busy and ``other`` cordoned."""

    def shown() -> str | None:
        fragment = visitor.get("/fragments/gpus").text
        busy, cordoned = cell(fragment, card), cell(fragment, other)
        ready = f'data-utilisation="{float(BUSY)}"' in busy and 'data-state="cordoned"' in cordoned
        return fragment if ready else None

    found: str = wait_for(shown, "the grid to show the busy card and the cordoned one")
    return found


def test_the_grid_shows_the_jobs_card_busy_with_its_task_and_the_card_an_admin_cordoned(
    dgx: Server, nvml: RecordedNvml
) -> None:
    admin, alice, card, other = start_busy_job(dgx, nvml)
    owner = signed_in(dgx.url, alice.token)
    page = owner.get("/gpus").text
    assert 'href="/ui/gpus" class="here"' in page  # the nav's entry
    assert 'data-refresh="/ui/fragments/gpus"' in page
    fragment = wait_grid(owner, card, other)
    busy = cell(fragment, card)
    assert f'style="background-color: {heat(BUSY)}; color: #fff"' in busy
    assert f'<span class="gpu-percent">{BUSY}%</span>' in busy
    assert '<div class="gpu-memory">39.1 / 79.6 GiB</div>' in busy  # 40,000 of 81,559 MiB
    assert '<span class="gpu-task">train-worker-0</span>' in busy
    cordoned = cell(fragment, other)
    assert '<div class="gpu-cordon" data-by="admin">cordoned (admin)</div>' in cordoned
    assert "cordoned by admin since " in title(cordoned) and REASON in title(cordoned)
    # the other cards: read, idle, free
    idle = cell(fragment, (card + 1) % 8)
    assert 'data-state="read"' in idle and '<span class="gpu-free">free</span>' in idle
    assert f"background-color: {heat(0)}" in idle
    summary = re.sub(r"<[^>]+>", "", fragment.split('id="gpu-summary">')[1].split("</p>")[0])
    assert summary.startswith("1 node, 8 cards: 8 read (mean ")
    assert "1 with tasks, 1 cordoned." in summary
    assert "gpu-absent" not in fragment  # this node's cards are read
    # another user sees the task as a count; the admin sees its name
    bob = signed_in(dgx.url, admin.user("bob").token)
    theirs = cell(bob.get("/fragments/gpus").text, card)
    assert (
        "train-worker-0" not in theirs and '<span class="gpu-others">1 of others</span>' in theirs
    )
    everyone = cell(signed_in(dgx.url, admin.token).get("/fragments/gpus").text, card)
    assert '<span class="gpu-task">train-worker-0</span>' in everyone

    # the job page: the summary line and the chart from the job's windows
    def use_shown() -> str | None:
        text = owner.get("/fragments/jobs/train").text
        return text if 'id="gpu-chart"' in text and f">{BUSY}%</strong>" in text else None

    job_page = wait_for(use_shown, "the job page to show its GPU use")
    said = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", job_page.split('id="gpu-summary">')[1]))
    assert said.startswith(f"Utilisation {BUSY}% mean, {BUSY}% peak; memory 39.1 GiB mean")
    assert "1 card," in said
    assert re.search(
        r'<tr data-task="train-worker-0"><td>train-worker-0</td><td>dgx-0</td>'
        rf"<td>{card}</td><td>{BUSY}%</td>",
        job_page,
    )
    # a job that asks for no GPU has no such section
    alice.submit("cpu-only", "team", role(command=["sleep", "600"]))
    alice.wait_phase("cpu-only", "Running")
    assert 'id="gpu-use"' not in owner.get("/fragments/jobs/cpu-only").text


def test_a_node_whose_gpus_are_not_read_says_why(tmp_path: Path) -> None:
    absent = RecordedNvml.absent()
    with running_server(tmp_path, cluster=DGX, nvml=absent, gpu_interval=0.2) as server:
        visitor = signed_in(server.url, server.admin_token or "")

        def said() -> str | None:
            fragment = visitor.get("/fragments/gpus").text
            return fragment if "gpu-absent" in fragment else None

        fragment = wait_for(said, "the line saying the node's GPUs are not read")
        line = re.search(r'<p class="gpu-absent" data-node="dgx-0">([^<]*)</p>', fragment)
        assert line is not None and line.group(1).startswith("The GPUs of dgx-0 are not read: ")
        assert all('data-state="unread"' in cell(fragment, i) for i in range(8))
        assert "0 read" in fragment


@pytest.fixture
def browser() -> Iterator[Browser]:
    executable = chromium("the console's GPUs page in a browser")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.mark.browser
def test_the_grid_renders_in_a_browser_and_follows_the_cards(
    browser: Browser, dgx: Server, nvml: RecordedNvml, tmp_path: Path
) -> None:
    _, alice, card, other = start_busy_job(dgx, nvml)
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.set_default_timeout(int(DEADLINE * 1000))
    page.goto(f"{dgx.url}/ui/gpus")
    page.fill("#token", alice.token)
    page.click("form.login button[type=submit]")
    page.wait_for_url(f"{dgx.url}/ui/gpus")
    page.evaluate("window.notReloaded = true")
    busy = f'.gpu-row[data-node="{NODE}"] .gpu-cell[data-gpu="{card}"]'
    page.wait_for_selector(f'{busy}[data-utilisation="{float(BUSY)}"]')
    page.wait_for_selector(f'.gpu-row .gpu-cell[data-gpu="{other}"][data-state="cordoned"]')
    style: dict[str, Any] = page.eval_on_selector(
        busy,
        "e => { const s = getComputedStyle(e); return {bg: s.backgroundColor, ink: s.color}; }",
    )
    assert style == {"bg": heat(BUSY), "ink": "rgb(255, 255, 255)"}
    assert page.inner_text(f"{busy} .gpu-task") == "train-worker-0"
    cordoned = page.locator(f'.gpu-cell[data-gpu="{other}"]')
    assert REASON in (cordoned.get_attribute("title") or "")
    outline = cordoned.evaluate("e => getComputedStyle(e).outlineStyle")
    assert outline == "solid"  # marked apart from the others
    # the card quietens: the cell follows without a reload
    nvml.set(card, utilisation=12)
    page.wait_for_selector(f'{busy}[data-utilisation="12.0"]')
    assert page.evaluate("window.notReloaded") is True
    folder = Path(os.environ.get("PHALANX_CONSOLE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    nvml.set(card, utilisation=BUSY)
    page.wait_for_selector(f'{busy}[data-utilisation="{float(BUSY)}"]')
    page.screenshot(path=str(folder / "gpus.png"))
    assert (folder / "gpus.png").stat().st_size > 0
    # the job page draws its chart of the job's windows
    page.goto(f"{dgx.url}/ui/jobs/train")
    page.wait_for_selector("#gpu-chart polyline.mean", state="attached")  # flat: no height
    assert page.locator('#gpu-chart g[data-panel="utilisation"] polyline.mean').count() == 1
    assert page.inner_text("#gpu-utilisation-peak") == f"{BUSY}%"  # its mean counts the 12%
    page.screenshot(path=str(folder / "job-gpus.png"), full_page=True)
