"""A chart opened on its own in a real browser (headless Chromium): a white plot area,
not the black an unstyled SVG rect fills with, and every legend label inside the chart.

Needs the ``playwright`` package and a Chromium (Debian's ``chromium``); skips with the
reason where either is absent, and fails instead with PHALANX_REQUIRE_CHROMIUM=1 (CI).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np

from phalanx.benchmarks.fgd import POLICIES as LABELS
from phalanx.benchmarks.fgd import STEPS, Run
from phalanx.benchmarks.fgd_report import _chart
from tests.browser import chromium

POLICIES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "default")


def _runs() -> list[Run]:
    arrived = np.linspace(0, 1.3 * 6212 * 1000, 500)
    return [
        Run(
            workload="default",
            policy=policy,
            seed=42,
            tune=1.3,
            total_gpus=6212,
            arrived=arrived,
            used=np.minimum(arrived, (0.8 + 0.02 * i) * 6212 * 1000),
            seconds=1.0,
        )
        for i, policy in enumerate(POLICIES)
    ]


def _authors(traces: Path) -> None:
    """An authors' CSV with a row per policy, so every legend label says "(dashed: authors)"."""
    folder = traces / "alibaba-gpu-v2023-openb" / "fgd_expected_results"
    folder.mkdir(parents=True)
    head = ["workload", "sc_policy", "tune", "seed", "total_gpus", *(str(k) for k in STEPS)]
    rows = [
        ["openb_pod_list_default", LABELS[p], "1.3", "42", "6212", *(str(0.7 * k) for k in STEPS)]
        for p in POLICIES
    ]
    text = "\n".join(",".join(row) for row in [head, *rows]) + "\n"
    (folder / "analysis_allo_discrete.csv").write_text(text)


def test_the_fgd_chart_alone_has_a_white_plot_and_its_whole_legend(tmp_path: Path) -> None:
    executable = chromium("the SVG screenshot test")
    from playwright.sync_api import sync_playwright

    _authors(tmp_path / "traces")
    svg = _chart(_runs(), tmp_path / "traces", "default")
    assert "gpuclustering (dashed: authors)" in svg
    chart = tmp_path / "chart.svg"
    chart.write_text(svg)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 600})
        page.goto(chart.as_uri())
        boxes: list[dict[str, Any]] = page.evaluate(
            """() => {
                const svg = document.documentElement;
                const width = svg.viewBox.baseVal.width;
                const box = svg.querySelector('rect.box').getBoundingClientRect();  // on screen
                const labels = [...svg.querySelectorAll('text')]
                    .filter(t => t.querySelector('title'))
                    .map(t => ({text: t.firstChild.textContent, right: t.getBBox().x + t.getBBox().width}));
                return [{width, box: [box.x, box.y, box.width, box.height]}, ...labels];
            }"""
        )
        png = page.screenshot(type="png")
        # read the screenshot's pixels back in the browser (a PNG data URL does not taint)
        pixel: list[int] = browser.new_page().evaluate(
            """async ([data, x, y]) => {
                const img = new Image();
                img.src = data;
                await img.decode();
                const c = document.createElement('canvas');
                c.width = img.width; c.height = img.height;
                const g = c.getContext('2d');
                g.drawImage(img, 0, 0);
                return [...g.getImageData(x, y, 1, 1).data];
            }""",
            [
                "data:image/png;base64," + base64.b64encode(png).decode(),
                int(boxes[0]["box"][0] + boxes[0]["box"][2] * 0.93),
                int(boxes[0]["box"][1] + 8),  # top right of the plot: no curve passes there
            ],
        )
        browser.close()

    frame, labels = boxes[0], boxes[1:]
    assert pixel[:3] == [255, 255, 255], f"the plot area is not white: {pixel}"
    assert [label["text"] for label in labels] == [f"{p} (dashed: authors)" for p in POLICIES]
    overflow = [label for label in labels if label["right"] > frame["width"]]
    assert not overflow, f"legend labels past the chart's right edge {frame['width']}: {overflow}"
