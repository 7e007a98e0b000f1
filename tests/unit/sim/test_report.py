"""report.html: the comparison table, one chart per figure, escaping, bounded series."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from phalanx.domain.errors import DocumentError
from phalanx.sim.eventlog import read_run
from phalanx.sim.report import CDF_POINTS, GANTT_JOBS, MAX_POINTS, render_report
from phalanx.sim.svg import (
    Canvas,
    cdf,
    downsample_steps,
    esc,
    fmt_duration,
    text_width,
    time_ticks,
)

HOSTILE = "<script>alert(1)</script>"
CHARTS_PER_RUN = 6  # JCT CDF, delay CDF, allocation, queue shares, user shares, Gantt
OVERLAYS = 2  # JCT and delay CDFs of all runs


def _summary(*, policy: str, avg_jct: float, alloc: float, **extra: Any) -> dict[str, Any]:
    queue = {"jobs": 1, "finished": 1, "avg_jct_s": avg_jct, "avg_queue_delay_s": 0.0,
             "starvation_s": 0.0, "gpu_share_avg": 0.25, "time_below_guarantee_s": 0.0,
             "preemptions": 0}  # fmt: skip
    return {
        "policy": policy, "total_gpus": 16, "jobs": 2, "finished": 2, "failed": 0,
        "unfinished": 0, "avg_jct_s": avg_jct, "p50_jct_s": avg_jct, "p95_jct_s": avg_jct,
        "p99_jct_s": avg_jct, "avg_queue_delay_s": 30.0, "p95_queue_delay_s": 60.0,
        "avg_slowdown": 1.2, "makespan_s": 9000.0, "throughput_jobs_per_h": 0.8,
        "gpu_alloc_ratio_avg": alloc, "preemptions": 1, "jain_fairness": 0.9, "sessions": 10,
        "session_p50_ms": 1.0, "session_p99_ms": 2.0, "sim_wall_s": 0.5,
        "per_queue": {"nlp": queue, HOSTILE: queue}, **extra,
    }  # fmt: skip


def _start(t: float, job: str, queue: str, *tasks: tuple[str, float]) -> dict[str, Any]:
    rows = [{"task": name, "node": "n-0", "gpus": list(range(int(gpus))),
             "resources": {"cpu": 4000, "memory": 2**30, "gpu": gpus}} for name, gpus in tasks]  # fmt: skip
    return {"t": t, "ev": "Placed", "job": job, "queue": queue, "user": "u", "tasks": rows}


def _ev(t: float, ev: str, job: str, queue: str, **extra: Any) -> dict[str, Any]:
    return {"t": t, "ev": ev, "job": job, "queue": queue, "user": "u", **extra}


def _events(shift: float = 0.0) -> list[dict[str, Any]]:
    """Two jobs: ``a`` (nlp, 2 x 4 GPUs) and a hostile one (8 GPUs, evicted once)."""
    bad = f"job-{HOSTILE}"
    return [
        _ev(0.0, "Submitted", "a", "nlp"),
        _ev(10.0, "Submitted", bad, HOSTILE),
        _start(30.0, "a", "nlp", ("a-w-0", 4), ("a-w-1", 4)),
        _start(60.0, bad, HOSTILE, (f"{bad}-w-0", 8)),
        _ev(600.0, "reserve", bad, HOSTILE, nodes=["n-0"], start=900.0),
        _ev(1200.0, "Evicted", bad, HOSTILE, tasks=[f"{bad}-w-0"], by="a", action="preempt"),
        _start(1500.0, bad, HOSTILE, (f"{bad}-w-0", 8)),
        _ev(5400.0 + shift, "Succeeded", "a", "nlp", tasks=["a-w-0", "a-w-1"]),
        _ev(9000.0, "Succeeded", bad, HOSTILE, tasks=[f"{bad}-w-0"]),
    ]


def _write_run(folder: Path, summary: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    lines = (json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    (folder / "events.jsonl").write_text("".join(lines), encoding="utf-8")
    return folder


@pytest.fixture
def two_runs(tmp_path: Path) -> list[Path]:
    return [
        _write_run(tmp_path / "fifo", _summary(policy="fifo", avg_jct=5400.0, alloc=0.5), _events()),
        _write_run(tmp_path / "drf", _summary(policy="drf", avg_jct=7200.0, alloc=0.75), _events(1800.0)),
    ]  # fmt: skip


def _render(runs: list[Path], tmp_path: Path, title: str = "policies") -> str:
    out = tmp_path / "out" / "report.html"
    render_report(runs, out, title=title)
    return out.read_text(encoding="utf-8")


def test_the_table_shows_every_run_and_marks_the_best(two_runs: list[Path], tmp_path: Path) -> None:
    page = _render(two_runs, tmp_path)
    assert "<th>fifo</th><th>drf</th>" in page
    # lower JCT is better: fifo's 1.5 h is marked, drf's 2 h is not
    assert '<td class=best title="5400.0">1.5 h</td><td title="7200.0">2 h</td>' in page
    # higher allocation is better
    assert '<td title="0.5">50.0%</td><td class=best title="0.75">75.0%</td>' in page
    # a tie marks nobody
    assert '<td title="0.9">0.9</td><td title="0.9">0.9</td>' in page


def test_one_svg_per_chart(two_runs: list[Path], tmp_path: Path) -> None:
    compared = _render(two_runs, tmp_path)
    assert compared.count("<svg") == OVERLAYS + 2 * CHARTS_PER_RUN
    single = _render(two_runs[:1], tmp_path)
    assert single.count("<svg") == CHARTS_PER_RUN
    assert "Runs side by side" not in single
    assert "<script" not in compared.lower()
    assert "http://" not in compared.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_names_from_the_trace_are_escaped(two_runs: list[Path], tmp_path: Path) -> None:
    page = _render(two_runs, tmp_path, title=f"compare {HOSTILE}")
    assert HOSTILE not in page
    assert "<script" not in page
    assert esc(HOSTILE) in page  # queue in tables, legends, job names in the Gantt
    assert esc(f"job-{HOSTILE}") in page
    assert f"<h1>compare {esc(HOSTILE)}</h1>" in page


def test_events_give_allocation_jct_delay_and_spans(two_runs: list[Path]) -> None:
    run = read_run(two_runs[0])
    t, v = run.changes.series(run.start or 0.0)
    held = dict(zip(t.tolist(), v.tolist(), strict=True))
    assert held == {
        0.0: 0.0,
        30.0: 8.0,
        60.0: 16.0,
        1200.0: 8.0,
        1500.0: 16.0,
        5400.0: 8.0,
        9000.0: 0.0,
    }
    by_user = run.user_changes.series(run.start or 0.0, "u")  # the one user holds it all
    assert dict(zip(by_user[0].tolist(), by_user[1].tolist(), strict=True)) == held
    assert run.jct == {"nlp": [5400.0], HOSTILE: [8990.0]}
    assert run.delay == {"nlp": [30.0], HOSTILE: [50.0]}
    bad = run.jobs[f"job-{HOSTILE}"]
    assert bad.intervals == [(60.0, 1200.0), (1500.0, 9000.0)]
    assert bad.evictions == [1200.0]
    assert bad.gpu_seconds == 8 * (1140.0 + 7500.0)


def test_a_long_series_is_down_sampled(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    for i in range(6000):  # 12,000 allocation changes
        events += [
            _ev(10.0 * i, "Submitted", f"j{i}", "nlp"),
            _start(10.0 * i, f"j{i}", "nlp", (f"j{i}-0", 1 + i % 7)),
        ]
        events.append(_ev(10.0 * i + 5 + i % 3, "Succeeded", f"j{i}", "nlp", tasks=[f"j{i}-0"]))  # fmt: skip
    run = _write_run(tmp_path / "long", _summary(policy="fifo", avg_jct=6.0, alloc=0.3), events)
    page = _render([run], tmp_path)
    counts = [int(n) for n in re.findall(r'data-n="(\d+)"', page)]
    assert counts and max(counts) <= MAX_POINTS
    assert max(counts) > MAX_POINTS // 2  # the allocation line is drawn, thinned, not dropped
    assert len(set(re.findall(r"<title>(j\d+) \(", page))) == GANTT_JOBS


def test_down_sampling_keeps_ends_and_peaks() -> None:
    t = np.arange(100_000, dtype=np.float64)
    v = np.sin(t / 500.0) * 10 + (t == 54_321) * 100
    ts, vs = downsample_steps(t, v, MAX_POINTS)
    assert ts.size <= MAX_POINTS
    assert ts[0] == 0.0 and ts[-1] == t[-1]
    assert vs.max() == v.max() and vs.min() == v.min()
    assert np.all(np.diff(ts) > 0)
    xs, ps = cdf(np.arange(50_000.0), CDF_POINTS)
    assert xs.size <= CDF_POINTS and xs[0] == 0.0 and xs[-1] == 49_999.0 and ps[-1] == 1.0


def test_time_axes_use_large_units() -> None:
    ticks, unit = time_ticks(0.0, 30 * 86400.0)
    assert unit == "d" and ticks[-1] == (30 * 86400.0, "30")
    assert time_ticks(0.0, 3 * 3600.0)[1] == "h"
    assert fmt_duration(5400.0) == "1.5 h" and fmt_duration(45.0) == "45 s"


def test_the_same_folders_give_the_same_bytes(two_runs: list[Path], tmp_path: Path) -> None:
    assert _render(two_runs, tmp_path) == _render(two_runs, tmp_path)


def test_a_folder_without_events_gets_its_tables(tmp_path: Path) -> None:
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "summary.json").write_text(
        json.dumps(_summary(policy="fifo", avg_jct=60.0, alloc=0.1))
    )
    page = _render([folder], tmp_path)
    assert "1 min" in page and "no job ran" in page


def test_bad_inputs_name_the_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match=r"summary\.json"):
        render_report([tmp_path / "missing"], tmp_path / "r.html", title="x")
    events = [json.dumps(e) for e in _events()]
    events.insert(2, '{"t": 1, "ev": "Placed", "job": "a"')  # cut short
    run = _write_run(tmp_path / "broken", _summary(policy="x", avg_jct=1.0, alloc=0.1), [])
    (run / "events.jsonl").write_text("\n".join(events) + "\n")
    with pytest.raises(DocumentError, match=r"events\.jsonl, line 3"):
        render_report([run], tmp_path / "r.html", title="x")
    assert not (tmp_path / "r.html").exists()


def test_identical_runs_are_named_and_their_charts_drawn_once(tmp_path: Path) -> None:
    names = ("fifo", "sjf-oracle", "drf")
    runs = [
        _write_run(tmp_path / n, _summary(policy=n, avg_jct=5400.0, alloc=0.5), _events())
        for n in names
    ]
    for run in runs:
        (run / "jobs.csv").write_text("job,delay_s\na,0\n", encoding="utf-8")

    page = _render(runs, tmp_path)

    assert "fifo, sjf-oracle and drf gave identical results" in page
    assert "does not tell these policies apart" in page
    # one set of run charts (fifo's), the other two point at it
    assert page.count("<svg") == OVERLAYS + CHARTS_PER_RUN
    assert page.count("The same events as fifo, byte for byte") == 2


def test_runs_that_differ_get_no_identical_note(two_runs: list[Path], tmp_path: Path) -> None:
    for run, delay in zip(two_runs, ("0", "1800"), strict=True):
        (run / "jobs.csv").write_text(f"job,delay_s\na,{delay}\n", encoding="utf-8")
    extra = _write_run(
        tmp_path / "las", _summary(policy="las", avg_jct=5400.0, alloc=0.5), _events()
    )
    (extra / "jobs.csv").write_text("job,delay_s\na,0\n", encoding="utf-8")

    assert "identical" not in _render(two_runs, tmp_path)
    page = _render([*two_runs, extra], tmp_path)
    assert "fifo and las gave identical results" in page
    assert "does not tell these policies apart" not in page  # drf differs


def _legend_fits(svg: str) -> list[tuple[str, float, float]]:
    """(label, its right end by the estimate, the chart's width) for each legend label."""
    width = float(re.search(r'viewBox="0 0 (\d+) \d+"', svg)[1])  # type: ignore[index]
    texts = re.findall(r'<text x="([\d.]+)" y="[\d.]+">([^<]*)<title>', svg)
    return [(html.unescape(t), float(x) + text_width(html.unescape(t)), width) for x, t in texts]


def test_a_chart_stands_alone_with_explicit_fills_and_a_white_background() -> None:
    canvas = Canvas()
    x, y = canvas.xscale(0, 10), canvas.yscale(0, 1)
    canvas.axes(x, y, [(5.0, "5")], [(0.5, "50%")], xlabel="t", ylabel="share")
    svg = canvas.render("alone")

    # no page CSS: the plot box must be hollow (an SVG rect fills black by default)
    box = re.search(r'<rect [^>]*class="box"[^>]*>', svg)
    assert box is not None and 'fill="none"' in box[0] and 'stroke="' in box[0]
    assert all('stroke="' in line for line in re.findall(r'<line [^>]*class="grid"[^>]*>', svg))
    assert '<rect width="100%" height="100%" fill="#fff"/>' in svg
    assert 'font-family="' in svg and 'width="860" height="300"' in svg


def test_the_legend_widens_to_its_longest_label() -> None:
    canvas = Canvas(width=900, height=420)
    canvas.legend(
        [("random (dashed: authors)", "#000"), ("gpuclustering (dashed: authors)", "#111")]
    )
    svg = canvas.render("legend")

    fits = _legend_fits(svg)
    assert [label for label, _, _ in fits] == [
        "random (dashed: authors)",
        "gpuclustering (dashed: authors)",
    ]  # whole, not cut
    assert all(end <= width for _, end, width in fits)
    assert canvas.width > 900 and canvas.width - canvas.right == 900 - 170  # the plot box stays


def test_a_very_long_legend_label_is_cut_but_whole_in_its_tooltip() -> None:
    canvas = Canvas()
    long = "q" * 100
    canvas.legend([(long, "#000")])
    svg = canvas.render("legend")

    assert f"<title>{long}</title>" in svg and "q" * 39 + "…<title>" in svg
    assert all(end <= width for _, end, width in _legend_fits(svg))
