"""A job's GPU use on its page, drawn from views the API could give: each window a flat
step of its mean and peak, utilisation on 0..100% and memory on 0..its highest peak,
lines that break where the job held no card, the summary line, and the idle mark; no
chart before a first reading; a job that asks for no GPU has no such section."""

from __future__ import annotations

import re
from typing import Any

from phalanx.client import GpuUseView, JobGpusView, JobView, TaskGpuView, TaskView
from phalanx.web.console import Console
from phalanx.web.gpu_chart import (
    GAP,
    LEFT,
    MEMORY_BOX,
    RIGHT,
    UTILISATION_BOX,
    chart,
    summary,
)

T0 = 1_700_000_000.0
GI = 1 << 30


def window(start: float, end: float, **fields: Any) -> GpuUseView:
    values: dict[str, Any] = {
        "start": start,
        "end": end,
        "samples": 24,
        "cards": 4,
        "utilisation": 50.0,
        "utilisation_peak": 80.0,
        "memory": 8.0 * GI,
        "memory_peak": 16.0 * GI,
        **fields,
    }
    return GpuUseView(**values)


def points(line: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in line.split())]


def test_each_window_is_a_flat_step_on_the_two_scales() -> None:
    view = JobGpusView(
        job="bert",
        windows=[
            window(T0 + 60, T0 + 120, utilisation=100.0, utilisation_peak=100.0),
            window(T0, T0 + 55, utilisation=25.0, memory=4.0 * GI, memory_peak=8.0 * GI),
        ],
        summary=window(T0, T0 + 120, samples=48, utilisation=62.5),
    )
    drawn = chart(view)
    assert drawn is not None
    assert (drawn.start, drawn.end, drawn.windows, drawn.idle_x) == (T0, T0 + 120, 2, None)
    utilisation, memory = drawn.panels
    top, bottom = UTILISATION_BOX
    (mean,) = utilisation.mean
    per_second = (RIGHT - LEFT) / 120
    assert points(mean) == [
        (LEFT, bottom - 0.25 * (bottom - top)),  # the older window first
        (round(LEFT + 55 * per_second, 1), bottom - 0.25 * (bottom - top)),
        (round(LEFT + 60 * per_second, 1), top),
        (RIGHT, top),
    ]
    assert utilisation.scale == 100.0 and utilisation.scale_label == "100%"
    # memory: 0 to the highest peak (16 GiB at the top)
    assert (memory.scale, memory.scale_label) == (16.0 * GI, "16.0 GiB")
    m_top, m_bottom = MEMORY_BOX
    (peak,) = memory.peak
    assert [y for _, y in points(peak)] == [(m_top + m_bottom) / 2] * 2 + [m_top] * 2
    assert all(LEFT <= x <= RIGHT for line in (mean, peak) for x, _ in points(line))


def test_the_lines_break_where_the_job_held_no_card_and_a_lone_reading_shows() -> None:
    view = JobGpusView(
        job="j",
        windows=[
            window(T0, T0 + 60),
            window(T0 + 60 + GAP + 1, T0 + 60 + GAP + 1),  # one reading, after a gap
        ],
    )
    drawn = chart(view)
    assert drawn is not None
    for panel in drawn.panels:
        assert len(panel.mean) == 2 and len(panel.peak) == 2
        (left, y1), (right, y2) = points(panel.mean[1])
        assert y1 == y2 and right - left == 1.5  # a short dash
    close = JobGpusView(job="j", windows=[window(T0, T0 + 60), window(T0 + 60 + GAP, T0 + 200)])
    drawn = chart(close)
    assert drawn is not None and all(len(p.mean) == 1 for p in drawn.panels)


def test_the_idle_mark_stands_where_the_cards_went_idle() -> None:
    view = JobGpusView(
        job="j", windows=[window(T0, T0 + 100)], idle_since=T0 + 50, summary=window(T0, T0 + 100)
    )
    drawn = chart(view)
    assert drawn is not None
    assert drawn.idle_x == round(LEFT + (RIGHT - LEFT) / 2, 1)
    later = chart(view.model_copy(update={"idle_since": T0 + 400}))
    assert later is not None and (later.end, later.idle_x) == (T0 + 400, RIGHT)  # spans to it


def test_no_window_no_chart_and_the_summary_reads_as_people_read_it() -> None:
    assert chart(JobGpusView(job="j")) is None and summary(JobGpusView(job="j")) is None
    said = summary(
        JobGpusView(
            job="j",
            summary=window(
                T0,
                T0 + 60,
                utilisation=62.46,
                utilisation_peak=99.6,
                memory=12.34 * GI,
                memory_peak=150 * GI,
            ),
        )
    )
    assert said is not None
    assert (said.utilisation, said.utilisation_peak, said.memory, said.memory_peak) == (
        "62%",
        "100%",
        "12.3 GiB",
        "150 GiB",
    )


def make_job(**fields: Any) -> JobView:
    values: dict[str, Any] = {
        "name": "bert",
        "queue": "nlp",
        "user": "alice",
        "phase": "Running",
        "created_at": T0,
        "requests": {"gpu": 4.0, "cpu": 8000.0},
        "tasks": [TaskView(name="bert-w-0", role="w", index=0, phase="Running", node="n0")],
        **fields,
    }
    return JobView(**values)


def render(job: JobView, view: JobGpusView | None) -> str:
    """The job fragment, its GPU section drawn from ``view`` (None: the job has none)."""
    environment = Console(api_url=lambda: "http://api").templates.env
    use = None
    if view is not None:
        use = {
            "refused": "",
            "summary": summary(view),
            "chart": chart(view),
            "tasks": view.tasks,
            "idle_since": view.idle_since,
        }
    context = {"job": job, "ended": False, "events": [], "elastic": [], "sizes": []}
    context |= {"quoted": job.name, "csrf": "x", "user": None, "gpu_use": use}
    return environment.get_template("fragments/job.html").render(context)


def test_the_job_page_shows_the_summary_chart_idle_mark_and_each_tasks_reading() -> None:
    view = JobGpusView(
        job="bert",
        summary=window(T0, T0 + 120, utilisation=3.0, utilisation_peak=7.0),
        windows=[window(T0, T0 + 60), window(T0 + 61, T0 + 120, utilisation=1.0)],
        tasks=[
            TaskGpuView(
                task="bert-w-0", node="n0", gpus=[0, 1], utilisation=1.4, memory=GI, read_at=T0
            )
        ],
        idle_since=T0 + 61,
    )
    page = render(make_job(), view)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))
    assert "Utilisation 3% mean, 7% peak; memory 8.0 GiB mean, 16.0 GiB peak; 4 cards" in text
    assert "Idle since 2023-11-14 22:14:21 UTC" in text
    assert '<svg class="gpu-chart" id="gpu-chart" data-windows="2"' in page
    assert len(re.findall(r'<polyline class="mean"', page)) == 2  # a line per panel
    assert 'id="gpu-idle-mark"' in page and '<rect class="idle"' in page
    row = re.search(r'<tr data-task="bert-w-0">(.*?)</tr>', page)
    assert row is not None
    assert re.findall(r"<td>([^<]*)</td>", row.group(1)) == [
        "bert-w-0",
        "n0",
        "0, 1",
        "1%",
        "1.0 GiB",
        "2023-11-14 22:13:20",
    ]


def test_before_a_reading_the_section_says_so_and_a_job_without_gpus_has_none() -> None:
    waiting = render(make_job(phase="Pending", tasks=[]), JobGpusView(job="bert"))
    assert 'id="gpu-none"' in waiting and "the job has not been placed" in waiting
    assert "gpu-chart" not in waiting
    running = render(make_job(), JobGpusView(job="bert"))
    assert "No GPU reading yet: its nodes read their cards every few seconds" in running
    assert 'id="gpu-use"' not in render(make_job(requests={"cpu": 1000.0}), None)
