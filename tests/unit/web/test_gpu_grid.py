"""The GPUs page's grid, drawn from node views the API could give: a cell per card
coloured by its utilisation on one scale, an unread card hatched (never shown as idle),
a stale one marked, a cordoned one marked apart with its reason; the visitor's tasks by
name and the others counted; a node whose cards are not read says why; what a tenant
named is text, never markup."""

from __future__ import annotations

import html
import re
from itertools import pairwise
from typing import Any

from phalanx.client import GpuView, NodeView
from phalanx.web.console import Console
from phalanx.web.formatting import gib
from phalanx.web.gpu_grid import LEGEND, NAMES_SHOWN, PALE, STALE, STRONG, grid, heat

NOW = 1_700_000_000.0
GI = 1 << 30
EVIL = "<script>alert(1)</script>"


def make_gpu(index: int, **fields: Any) -> GpuView:
    """A read card (idle, 80 GiB, read a second ago) unless ``fields`` say otherwise."""
    values: dict[str, Any] = {
        "index": index,
        "model": "A100-SXM4-80GB",
        "used": 0.0,
        "uuid": f"GPU-{index}",
        "read_at": NOW - 1,
        "utilisation": 0.0,
        "memory_used": 0,
        "memory_total": 80 * GI,
        "temperature": 40.0,
        "power": 60.0,
        **fields,
    }
    return GpuView(**values)


def make_node(name: str, gpus: list[GpuView], **fields: Any) -> NodeView:
    return NodeView(
        name=name, capacity={"cpu": 64000.0}, allocated={"cpu": 0.0}, gpus=gpus, **fields
    )


def render(nodes: list[NodeView], *, admin: bool = False) -> str:
    environment = Console(api_url=lambda: "http://api").templates.env
    context = {"grid": grid(nodes, now=NOW), "is_admin": admin, "user": None}
    return environment.get_template("fragments/gpus.html").render(context)


def cells(fragment: str) -> dict[tuple[str, int], str]:
    """Each cell's tag and body, by (node, card)."""
    found = {}
    for node, body in re.findall(
        r'<div class="gpu-row" data-node="([^"]+)"[^>]*>(.*?)(?=<div class="gpu-row"|\Z)',
        fragment,
        re.S,
    ):
        for cell in body.split('<div class="gpu-cell ')[1:]:
            index = re.search(r'data-gpu="(\d+)"', cell)
            assert index is not None, cell
            found[html.unescape(node), int(index.group(1))] = cell
    return found


def test_the_colour_runs_from_pale_to_strong_in_equal_steps() -> None:
    assert heat(0) == "rgb({}, {}, {})".format(*PALE)
    assert heat(100) == "rgb({}, {}, {})".format(*STRONG)
    assert heat(150) == heat(100) and heat(-5) == heat(0)  # clamped
    middle = [round((p + s) / 2) for p, s in zip(PALE, STRONG, strict=True)]
    assert heat(50) == "rgb({}, {}, {})".format(*middle)
    # each step of the legend darker than the one before, channel by channel
    shades = [tuple(map(int, re.findall(r"\d+", heat(level)))) for level in LEGEND]
    for paler, darker in pairwise(shades):
        assert all(a > b for a, b in zip(paler, darker, strict=True))


def test_a_cell_says_utilisation_memory_and_the_tasks_given_the_card() -> None:
    busy = make_gpu(
        0,
        used=1.0,
        utilisation=87.4,
        memory_used=int(61.5 * GI),
        tasks=["bert-worker-0"],
        xid=0,
    )
    shared = make_gpu(1, used=0.75, utilisation=20.0, tasks=["a", "b", "c"], other_tasks=2)
    (row,) = grid([make_node("dgx-0", [busy, shared])], now=NOW).rows
    first, second = row.cells
    assert (first.percent, first.memory, first.tasks, first.state) == (
        "87%",
        "61.5 / 80.0 GiB",
        ("bert-worker-0",),
        "read",
    )
    assert first.colour == heat(87.4) and first.ink == "#fff"
    assert second.ink == "#1d232b"  # dark text on a pale shade
    assert second.tasks == ("a", "b")[:NAMES_SHOWN] and second.more == 1 and second.others == 2
    assert "tasks: a, b, c; 2 task(s) of other users" in second.title
    assert "87% busy, memory 61.5 / 80.0 GiB, 40 C, 60 W" in first.title
    assert "read 1s ago" in first.title
    assert (row.model, row.mean) == ("A100-SXM4-80GB", (87.4 + 20.0) / 2)
    assert row.read_at == NOW - 1


def test_an_unread_card_is_not_idle_a_stale_one_is_marked_and_a_cordoned_one_apart() -> None:
    unread = make_gpu(0, read_at=None, utilisation=None, memory_used=None, memory_total=None)
    stale = make_gpu(1, read_at=NOW - STALE - 5, utilisation=30.0)
    cordoned = make_gpu(
        2,
        utilisation=0.0,
        xid=79,
        cordoned="XID 79: the card fell off the bus",
        cordoned_by="health",
        cordoned_since=NOW - 120,
    )
    by_admin = make_gpu(3, utilisation=None, read_at=None, cordoned="bad fan", cordoned_by="admin")
    (row,) = grid([make_node("n", [unread, stale, cordoned, by_admin])], now=NOW).rows
    states = [c.state for c in row.cells]
    assert states == ["unread", "stale", "cordoned", "cordoned"]
    first, second, third, fourth = row.cells
    assert (first.colour, first.percent, first.memory) == ("", "-", "")
    assert "not read" in first.title
    assert second.colour == heat(30.0) and "(stale: no reading since)" in second.title
    assert third.colour == heat(0.0)  # still drawn by its utilisation, marked apart
    assert third.cordoned_by == "health"
    assert "cordoned by health since 2023-11-14 22:11:20 UTC: XID 79" in third.title
    assert "last XID error 79" in third.title
    assert fourth.colour == "" and "cordoned by admin: bad fan" in fourth.title
    assert row.mean == 15.0  # the read cards only


def test_the_summary_counts_cards_and_leaves_out_nodes_without_gpus() -> None:
    nodes = [
        make_node("a", [make_gpu(0, utilisation=100.0, used=1.0, tasks=["t"]), make_gpu(1)]),
        make_node("cpu-only", []),
        make_node("b", [make_gpu(0, utilisation=None, read_at=None, cordoned="x")]),
    ]
    drawn = grid(nodes, now=NOW)
    assert [r.node for r in drawn.rows] == ["a", "b"]
    s = drawn.summary
    assert (s.nodes, s.cards, s.read, s.allocated, s.cordoned, s.without_gpus) == (
        2,
        3,
        2,
        1,
        1,
        1,
    )
    assert s.mean == 50.0
    assert grid([], now=NOW).summary.mean is None


def test_the_fragment_draws_each_cell_in_its_colour_with_its_reason_and_tasks() -> None:
    nodes = [
        make_node(
            "dgx-0",
            [
                make_gpu(0, used=1.0, utilisation=90.0, memory_used=40 * GI, tasks=[EVIL]),
                make_gpu(
                    1,
                    utilisation=5.0,
                    other_tasks=1,
                    cordoned=f"admin says {EVIL}",
                    cordoned_by="admin",
                ),
                make_gpu(2, utilisation=None, read_at=None),
            ],
        ),
        make_node(
            "dgx-1",
            [make_gpu(0, utilisation=None, read_at=None, memory_total=None)],
            gpu_readings_absent="no NVML library (libnvidia-ml.so.1 not found)",
            cordoned=True,
        ),
    ]
    fragment = render(nodes)
    assert EVIL not in fragment and "&lt;script&gt;" in fragment
    drawn = cells(fragment)
    assert set(drawn) == {("dgx-0", 0), ("dgx-0", 1), ("dgx-0", 2), ("dgx-1", 0)}
    busy = drawn["dgx-0", 0]
    assert f'style="background-color: {heat(90.0)}; color: #fff"' in busy
    assert 'data-state="read"' in busy and 'data-utilisation="90.0"' in busy
    assert '<span class="gpu-percent">90%</span>' in busy
    assert '<div class="gpu-memory">40.0 / 80.0 GiB</div>' in busy
    assert '<span class="gpu-task">&lt;script&gt;alert(1)&lt;/script&gt;</span>' in busy
    cordoned = drawn["dgx-0", 1]
    assert 'data-state="cordoned"' in cordoned
    assert "admin says &lt;script&gt;" in cordoned  # the reason, in its title
    assert '<span class="gpu-others">1 of others</span>' in cordoned
    assert '<div class="gpu-cordon" data-by="admin">cordoned (admin)</div>' in cordoned
    unread = drawn["dgx-0", 2]
    assert 'data-state="unread"' in unread and "style=" not in unread
    assert "gpu-free" in unread
    absent = re.findall(r'<p class="gpu-absent" data-node="([^"]+)">([^<]*)</p>', fragment)
    assert absent == [
        ("dgx-1", "The GPUs of dgx-1 are not read: no NVML library (libnvidia-ml.so.1 not found)")
    ]
    assert '<div class="gpu-row" data-node="dgx-1" data-status="Cordoned">' in fragment
    summary = re.search(r'<p class="gpu-summary" id="gpu-summary">(.*?)</p>', fragment, re.S)
    assert summary is not None
    text = re.sub(r"<[^>]+>", "", summary.group(1))
    assert text == "2 nodes, 4 cards: 2 read (mean 48%), 2 with tasks, 1 cordoned."


def test_no_node_with_cards_says_where_cards_come_from() -> None:
    fragment = render([make_node("cpu-0", [])])
    assert 'id="no-gpus"' in fragment and "1 node without" in fragment


def test_memory_reads_in_gib() -> None:
    assert (gib(0), gib(0.25 * GI), gib(12.46 * GI), gib(141 * GI)) == ("0.0", "0.2", "12.5", "141")
