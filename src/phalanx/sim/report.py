"""report.html: one self-contained page that shows and compares simulation runs.

``render_report(runs, out, title=...)`` reads each run folder's ``summary.json`` and
streams its ``events.jsonl`` once (``phalanx.sim.eventlog`` says what it takes from the
events). The page has the summary figures side by side (the best per row marked where
lower or higher is clearly better; what reading datasets cost when a run modelled it;
fairness between users, blank for a workload of one user; idle GPUs when a run's queues
had idle policies), the per-queue figures, the per-user ones (the ``TOP_USERS`` users
with the most GPU-time, when there are two or more), and per run: JCT and
queueing-delay CDFs per queue, GPU allocation over time, GPUs per queue over time
(stacked) and a Gantt chart of the largest jobs. With several runs, the JCT and delay
CDFs of all runs are overlaid and the per-queue averages put side by side.

Guarantees:

- one HTML file with inline CSS and SVG only: no script, no network, no font file;
  it is written to a temporary file and renamed, so ``out`` is whole or absent;
- every name taken from a run (job, queue, policy, folder) and the title are escaped;
- a time-series line has at most ``MAX_POINTS`` points, a CDF line at most
  ``CDF_POINTS``, a stacked chart ``SHARE_BUCKETS`` buckets, a Gantt ``GANTT_JOBS`` rows,
  so the page stays well under 1 MB per run whatever the trace's size;
- the same run folders give the same bytes.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from phalanx.domain.resources import MEMORY, format_amount
from phalanx.sim.eventlog import Changes, JobSpan, RunLog, load_summary, read_run
from phalanx.sim.svg import (
    Canvas,
    Scale,
    bucket_means,
    cdf,
    color,
    downsample_steps,
    esc,
    fmt_duration,
    fmt_number,
    log_time_ticks,
    nice_ticks,
    time_ticks,
)

MAX_POINTS: Final = 2000
CDF_POINTS: Final = 400
SHARE_BUCKETS: Final = 400
#: Users drawn in the per-user share chart (those with the most GPU-seconds).
TOP_USERS: Final = 10
GANTT_JOBS: Final = 30
_PERCENT_TICKS: Final = [(p / 100, f"{p}%") for p in (0, 25, 50, 75, 100)]


def _run_names(summaries: Sequence[dict[str, Any]], folders: Sequence[Path]) -> list[str]:
    """Each run's policy (else its folder's name), numbered where two would read the same."""
    names = [
        str(s.get("policy") or f.name or "run") for s, f in zip(summaries, folders, strict=True)
    ]
    return [n if names.count(n) == 1 else f"{n} ({i + 1})" for i, n in enumerate(names)]


class _Colors(dict[str, str]):
    """Queue -> colour; a queue met for the first time takes the next colour."""

    def __missing__(self, queue: str) -> str:
        value = self[queue] = color(len(self))
        return value


# -- tables ---------------------------------------------------------------------------------

#: (summary key, label, format, which is better: "low", "high" or "").
_ROWS: Final = (
    ("jobs", "jobs", "count", ""), ("finished", "finished", "count", "high"),
    ("failed", "failed or killed", "count", "low"), ("unfinished", "unfinished at the end", "count", "low"),
    ("avg_jct_s", "average JCT", "duration", "low"), ("p50_jct_s", "median JCT", "duration", "low"),
    ("p95_jct_s", "p95 JCT", "duration", "low"), ("p99_jct_s", "p99 JCT", "duration", "low"),
    ("avg_queue_delay_s", "average queueing delay", "duration", "low"),
    ("p95_queue_delay_s", "p95 queueing delay", "duration", "low"),
    ("avg_slowdown", "average slowdown (JCT / run time)", "ratio", "low"),
    ("makespan_s", "makespan", "duration", "low"),
    ("throughput_jobs_per_h", "throughput (jobs/h)", "ratio", "high"),
    ("gpu_alloc_ratio_avg", "GPU allocation, time average", "percent", "high"),
    ("gpu_fragmented_ratio_avg", "fragmented GPUs (FGD) / all GPUs, time average", "percent", "low"),
    ("gpu_frag_rate_avg", "fragmented / free GPUs (FGD), time average", "percent", "low"),
    ("jain_fairness", "Jain's fairness index over queues", "ratio", "high"),
    ("users", "users", "count", ""),
    ("user_jain_mean", "Jain's index over users' fair shares, mean of windows", "ratio", "high"),
    ("user_jain_min", "Jain's index over users' fair shares, worst window", "ratio", "high"),
    ("user_worst_avg_wait_s", "average wait of the worst-off user", "duration", "low"),
    ("user_max_wait_s", "longest wait of any user's job", "duration", "low"),
    ("user_wait_max_over_mean", "worst user's average wait / all users' mean", "ratio", "low"),
    ("preemptions", "preemptions", "count", ""), ("sessions", "scheduling sessions", "count", ""),
    ("session_p50_ms", "session wall time p50 (ms)", "ratio", "low"),
    ("session_p99_ms", "session wall time p99 (ms)", "ratio", "low"),
    ("sim_wall_s", "simulation wall time", "duration", ""), ("total_gpus", "cluster GPUs", "count", ""),
)  # fmt: skip
#: Rows of runs that modelled datasets (``phalanx.sim.data``), shown when one did.
_DATA_ROWS: Final = (
    ("data_reads", "task starts reading datasets", "count", ""),
    ("data_hit_rate", "of them with all their data warm", "percent", "high"),
    ("data_cold_bytes", "bytes read from the remote store", "bytes", "low"),
    ("data_delay_avg_s", "average start delay for data", "duration", "low"),
    ("data_delay_p50_s", "median start delay for data", "duration", "low"),
    ("data_delay_p95_s", "p95 start delay for data", "duration", "low"),
    ("data_evictions", "datasets evicted from node caches", "count", "low"),
    ("data_uncached_reads", "reads that did not fit a node's cache", "count", "low"),
)  # fmt: skip
#: Rows of runs whose queues had idle policies (``phalanx.sim.idle``), shown when one did.
_IDLE_ROWS: Final = (
    ("idle_marked", "jobs marked for idle GPUs", "count", ""),
    ("idle_stopped", "jobs stopped for idle GPUs", "count", ""),
    ("idle_shrunk", "elastic jobs shrunk for idle GPUs", "count", ""),
    ("idle_gpu_hours", "GPU-hours held idle", "ratio", "low"),
    ("idle_gpu_hours_returned", "GPU-hours returned by stopping idle jobs", "ratio", "high"),
)  # fmt: skip
_QUEUE_COLUMNS: Final = (
    ("jobs", "jobs", "count"), ("finished", "finished", "count"), ("avg_jct_s", "avg JCT", "duration"),
    ("avg_queue_delay_s", "avg delay", "duration"), ("starvation_s", "longest wait", "duration"),
    ("gpu_share_avg", "GPU share", "percent"), ("time_below_guarantee_s", "below guarantee", "duration"),
    ("preemptions", "preemptions", "count"),
)  # fmt: skip
_USER_COLUMNS: Final = (
    ("jobs", "jobs", "count"), ("finished", "finished", "count"), ("avg_jct_s", "avg JCT", "duration"),
    ("avg_wait_s", "avg wait", "duration"), ("starvation_s", "longest wait", "duration"),
    ("gpu_time_s", "GPU-hours", "hours"),
)  # fmt: skip


def _fmt(value: object, kind: str) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–" if value is None else esc(value)
    if kind == "duration":
        return fmt_duration(value)
    if kind == "percent":
        return f"{100 * value:.1f}%"
    if kind == "hours":
        return fmt_number(round(value / 3600.0, 1))
    if kind == "bytes":
        return esc(format_amount(MEMORY, value))
    return f"{value:,}" if isinstance(value, int) else fmt_number(round(value, 3))


def _cells(values: Sequence[object], kind: str, better: str) -> str:
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    best = None
    if better and len(numbers) > 1 and min(numbers) != max(numbers):
        best = min(numbers) if better == "low" else max(numbers)
    return "".join(
        f"<td{' class=best' if best is not None and v == best else ''} "
        f'title="{esc(json.dumps(v))}">{_fmt(v, kind)}</td>'
        for v in values
    )


def _table(head: Sequence[str], rows: Sequence[str]) -> str:
    cols = "".join(f"<th>{h}</th>" for h in head)
    return f"<table><thead><tr>{cols}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _summary_table(runs: Sequence[RunLog]) -> str:
    rows = [
        f"<tr><th>{label}</th>{_cells([r.summary.get(key) for r in runs], kind, better)}</tr>"
        for key, label, kind, better in (
            *_ROWS,
            *(row for row in (*_DATA_ROWS, *_IDLE_ROWS) if any(row[0] in r.summary for r in runs)),
        )
    ]
    return _table(["figure", *(esc(r.name) for r in runs)], rows)


def _per_queue(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    value = summary.get("per_queue")
    return (
        {str(q): v for q, v in value.items() if isinstance(v, dict)}
        if isinstance(value, dict)
        else {}
    )


def _swatch(queue: str, colors: dict[str, str]) -> str:
    return f'<span class="sw" style="background:{colors[queue]}"></span>{esc(queue)}'


def _queue_table(run: RunLog, colors: dict[str, str]) -> str:
    rows = [
        f"<tr><th>{_swatch(q, colors)}</th>"
        + "".join(_cells([figures.get(key)], kind, "") for key, _, kind in _QUEUE_COLUMNS)
        + "</tr>"
        for q, figures in sorted(_per_queue(run.summary).items())
    ]
    return _table(["queue", *(label for _, label, _ in _QUEUE_COLUMNS)], rows)


def _user_table(run: RunLog) -> str:
    """The ``TOP_USERS`` users with the most GPU-time, with their waits (none for a
    workload of one user: its figures are the cluster's)."""
    value = run.summary.get("per_user")
    users = (
        [(str(u), v) for u, v in value.items() if isinstance(v, dict)]
        if isinstance(value, dict)
        else []
    )
    if len(users) < 2:
        return ""
    users.sort(key=lambda item: (-float(item[1].get("gpu_time_s") or 0.0), item[0]))
    rows = [
        f"<tr><th>{esc(user)}</th>"
        + "".join(_cells([_user_figure(figures, key)], kind, "") for key, _, kind in _USER_COLUMNS)
        + "</tr>"
        for user, figures in users[:TOP_USERS]
    ]
    note = (
        f"the {TOP_USERS} with the most GPU-time of {len(users)}" if len(users) > TOP_USERS else ""
    )
    head = f"<h3>Per user{f' ({note})' if note else ''}</h3>"
    return head + _table(["user", *(label for _, label, _ in _USER_COLUMNS)], rows)


def _user_figure(figures: dict[str, Any], key: str) -> object:
    """A per-user figure; no average JCT (not 0) for a user none of whose jobs finished."""
    return None if key == "avg_jct_s" and not figures.get("finished") else figures.get(key)


def _queue_compare(runs: Sequence[RunLog], colors: dict[str, str], key: str, label: str) -> str:
    queues = sorted({q for r in runs for q in _per_queue(r.summary)})
    rows = [
        f"<tr><th>{_swatch(q, colors)}</th>"
        + _cells([_per_queue(r.summary).get(q, {}).get(key) for r in runs], "duration", "low")
        + "</tr>"
        for q in queues
    ]
    return f"<h3>{label} per queue</h3>" + _table(["queue", *(esc(r.name) for r in runs)], rows)


# -- charts -----------------------------------------------------------------------------------


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


def _empty(canvas: Canvas, what: str) -> str:
    canvas.raw(
        f'<text x="{canvas.width // 2}" y="{canvas.height // 2}" text-anchor="middle">{esc(what)}</text>'
    )
    return canvas.render(what)


def _cdf_chart(lines: Sequence[tuple[str, str, list[float]]], what: str, caption: str) -> str:
    canvas = Canvas()
    drawn = [(label, stroke, values) for label, stroke, values in lines if values]
    if not drawn:
        return _figure(_empty(canvas, f"no {what} to show"), caption)
    hi = max(10.0, *(max(values) for _, _, values in drawn)) * 1.05
    x, y = canvas.xscale(1.0, hi, log=True), canvas.yscale(0.0, 1.0)
    canvas.axes(x, y, log_time_ticks(1.0, hi), _PERCENT_TICKS, xlabel=f"{what} (log scale)",
                ylabel="share of jobs at or below")  # fmt: skip
    for _, stroke, values in drawn:
        xs, ps = cdf(values, CDF_POINTS)
        canvas.steps(x, y, np.r_[xs[0], xs], np.r_[0.0, ps], stroke=stroke)
    canvas.legend([(f"{label} ({len(values):,})", stroke) for label, stroke, values in drawn])
    return _figure(canvas.render(f"CDF of {what}"), caption)


def _time_axes(
    canvas: Canvas, run: RunLog, y: Scale, yticks: list[tuple[float, str]], ylabel: str
) -> Scale:
    span = max(run.end - (run.start or 0.0), 1.0)
    ticks, unit = time_ticks(0.0, span)
    x = canvas.xscale(0.0, span)
    canvas.axes(
        x, y, ticks, yticks, xlabel=f"time since the first submission ({unit})", ylabel=ylabel
    )
    return x


def _alloc_chart(run: RunLog) -> str:
    canvas, total, start = Canvas(), run.total_gpus, run.start or 0.0
    t, v = downsample_steps(*run.changes.series(start), MAX_POINTS)
    if total:
        y = canvas.yscale(0.0, max(1.0, float(v.max()) / total))
        ticks = [(p, f"{100 * p:.0f}%") for p in nice_ticks(0.0, y.hi)]
        x = _time_axes(canvas, run, y, ticks, "allocated / cluster GPUs")
        canvas.steps(x, y, t - start, v / total, stroke="#4e79a7", until=run.end - start)
        average = run.summary.get("gpu_alloc_ratio_avg")
        if isinstance(average, int | float):
            canvas.hline(y.at(average), x, label=f"time average {100 * average:.1f}%")
        return _figure(canvas.render("GPU allocation over time"), (
            f"GPUs held by running tasks over the cluster's {total:,.0f}, from the Placed, Evicted, "
            f"TaskFailed and end events ({t.size:,} points shown).")
        )  # fmt: skip
    y = canvas.yscale(0.0, max(1.0, float(v.max())))
    x = _time_axes(canvas, run, y, [(n, fmt_number(n)) for n in nice_ticks(0.0, y.hi)], "GPUs held")
    canvas.steps(x, y, t - start, v, stroke="#4e79a7", until=run.end - start)
    return _figure(
        canvas.render("GPUs held over time"),
        "GPUs held by running tasks (summary.json gives no cluster size: no ratio).",
    )


def _share_chart(
    run: RunLog,
    changes: Changes,
    names: Sequence[str],
    colors: dict[str, str],
    who: str,
    note: str = "",
) -> str:
    """GPUs held by each of ``names`` (queues or users) over time, stacked."""
    canvas, start = Canvas(), run.start or 0.0
    edges = np.linspace(start, max(run.end, start + 1.0), SHARE_BUCKETS + 1)
    stack, bands = np.zeros(SHARE_BUCKETS), []
    for name in names:
        top = stack + bucket_means(*changes.series(start, name), edges)
        bands.append((name, stack, top))
        stack = top
    y = canvas.yscale(0.0, max(run.total_gpus, float(stack.max()), 1.0))
    x = _time_axes(canvas, run, y, [(n, fmt_number(n)) for n in nice_ticks(0.0, y.hi)], "GPUs")
    for name, low, high in bands:
        canvas.band(x, y, edges - start, low, high, fill=colors[name])
    if run.total_gpus:
        canvas.hline(y.at(run.total_gpus), x, label=f"cluster: {run.total_gpus:,.0f} GPUs")
    canvas.legend([(name or "(none)", colors[name]) for name in reversed(names)])
    width = fmt_duration(float(edges[1] - edges[0]))
    return _figure(canvas.render(f"GPUs per {who} over time"), (
        f"GPUs held by each {who}, stacked (legend top to bottom as drawn); each step is the "
        f"time average over {esc(width)}.{note}")
    )  # fmt: skip


def _user_share_chart(run: RunLog) -> str:
    """The users with the most GPU-seconds, each with its own band (at most ``TOP_USERS``)."""
    seconds: dict[int, float] = {}
    for job in run.jobs.values():
        seconds[job.ui] = seconds.get(job.ui, 0.0) + job.gpu_seconds
    by_index = {index: user for user, index in run.user_changes.index.items()}
    ranked = sorted((s for s in seconds.items() if s[1] > 0), key=lambda s: (-s[1], by_index[s[0]]))
    top = [by_index[index] for index, _ in ranked[:TOP_USERS]]
    if not top:
        return ""
    colors = {user: color(i) for i, user in enumerate(top)}
    note = (
        f" The {len(top)} users with the most GPU-seconds of {len(ranked)} are shown."
        if len(ranked) > len(top)
        else ""
    )
    return _share_chart(run, run.user_changes, top, colors, "user", esc(note))


def _gantt(run: RunLog, colors: dict[str, str]) -> str:
    def size(item: tuple[str, JobSpan]) -> tuple[float, float, str]:
        ran = sum(b - a for a, b in item[1].intervals)
        return (-item[1].gpu_seconds, -ran, item[0])

    top = heapq.nsmallest(
        GANTT_JOBS, ((n, j) for n, j in run.jobs.items() if j.intervals), key=size
    )
    top.sort(key=lambda item: (item[1].intervals[0][0], item[0]))
    canvas, start = Canvas(left=180, height=60 + 16 * max(len(top), 1)), run.start or 0.0
    if not top:
        return _figure(_empty(canvas, "no job ran"), "Largest jobs.")
    y = canvas.yscale(0.0, float(len(top)))
    x = _time_axes(canvas, run, y, [], "")
    for row, (name, job) in enumerate(top):
        _gantt_row(canvas, x, y.at(len(top) - row), (name, job, colors[job.queue], run.end), start)
    canvas.legend([(q, colors[q]) for q in sorted({j.queue for _, j in top})])
    return _figure(canvas.render("largest jobs"), (
        f"The {len(top)} largest jobs by GPU-time: a pale bar from first start to end, solid where "
        "running, red ticks where evicted; hover a bar for its figures.")
    )  # fmt: skip


def _gantt_row(
    canvas: Canvas, x: Scale, top: float, item: tuple[str, JobSpan, str, float], start: float
) -> None:
    name, job, fill, run_end = item
    first, end = job.intervals[0][0] - start, (job.end if job.end is not None else run_end) - start
    tip = (f"{name} ({job.queue}): {job.gpu_seconds / 3600:,.1f} GPU-hours, waited "
           f"{fmt_duration(job.intervals[0][0] - job.submit)}, evicted {len(job.evictions)} times")  # fmt: skip
    short = name if len(name) <= 24 else name[:23] + "…"
    canvas.raw(f'<text x="{canvas.left - 6}" y="{top + 11:.1f}" text-anchor="end">{esc(short)}'
               f"<title>{esc(tip)}</title></text>")  # fmt: skip
    canvas.rect(x.at(first), top + 2, x.at(end) - x.at(first), 12, fill=fill, tip=tip, opacity=0.3)
    for a, b in job.intervals:
        canvas.rect(
            x.at(a - start), top + 2, x.at(b - start) - x.at(a - start), 12, fill=fill, tip=tip
        )
    for t in job.evictions:
        px = x.at(t - start)
        canvas.raw(f'<path d="M{px:.1f} {top:.1f}v16" stroke="#d00" stroke-width="2"/>')


# -- page -------------------------------------------------------------------------------------

_CSS: Final = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:22px}h2{font-size:18px;margin-top:36px;border-bottom:1px solid #ccc}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0 16px}th,td{padding:3px 10px;border-bottom:1px solid #e4e4e4}
td{text-align:right;font-variant-numeric:tabular-nums}th{text-align:left;font-weight:600}
td.best{background:#dff3df;font-weight:700}
figure{margin:12px 0 24px}figcaption{color:#555;font-size:13px;max-width:860px}
svg{width:100%;max-width:860px;height:auto;font:11px system-ui,sans-serif}
svg .grid{stroke:#e6e6e6}svg .box{fill:none;stroke:#999}
.sw{display:inline-block;width:10px;height:10px;margin-right:6px}.meta{color:#555}
.same{background:#fff4d6;border-left:4px solid #e0a800;padding:6px 10px}
"""


def _run_section(index: int, run: RunLog, colors: dict[str, str]) -> str:
    queues = sorted(set(run.jct) | set(run.delay))
    jct = [(q, colors[q], run.jct[q]) for q in queues]
    delay = [(q, colors[q], run.delay[q]) for q in queues]
    parts = [
        f'<section id="run-{index}"><h2>{esc(run.name)}</h2>',
        f'<p class="meta">folder {esc(run.folder)}; {len(run.jobs):,} jobs in events.jsonl</p>',
        _queue_table(run, colors),
        _user_table(run),
        _cdf_chart(jct, "job completion time", "JCT (submission to successful end) per queue; "
                   "times under 1 s are drawn at 1 s."),
        _cdf_chart(delay, "queueing delay", "Queueing delay (submission to first start) per "
                   "queue; delays under 1 s, most often zero, are drawn at 1 s."),
        _alloc_chart(run),
        _share_chart(run, run.changes, sorted(run.changes.index), colors, "queue"),
        _user_share_chart(run),
        _gantt(run, colors),
        "</section>",
    ]  # fmt: skip
    return "".join(parts)


def _overlays(runs: Sequence[RunLog], colors: dict[str, str]) -> str:
    def merged(
        pick: Callable[[RunLog], dict[str, list[float]]],
    ) -> list[tuple[str, str, list[float]]]:
        return [
            (r.name, color(i), [v for vs in pick(r).values() for v in vs])
            for i, r in enumerate(runs)
        ]

    return "".join([
        "<section><h2>Runs side by side</h2>",
        _cdf_chart(merged(lambda r: r.jct), "job completion time",
                   "JCT of all finished jobs, one line per run (times under 1 s drawn at 1 s)."),
        _cdf_chart(merged(lambda r: r.delay), "queueing delay",
                   "Queueing delay of all started jobs, one line per run (under 1 s drawn at 1 s)."),
        _queue_compare(runs, colors, "avg_jct_s", "Average JCT"),
        _queue_compare(runs, colors, "avg_queue_delay_s", "Average queueing delay"),
        "</section>",
    ])  # fmt: skip


def _digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes, None when it cannot be read."""
    try:
        with path.open("rb") as source:
            return hashlib.file_digest(source, "sha256").hexdigest()
    except OSError:
        return None


def _identical_note(names: Sequence[str], folders: Sequence[Path]) -> list[str]:
    """A warning naming each group of runs whose per-job results (``jobs.csv``: every job's
    delay, JCT, slowdown and preemptions) are the same: they did not tell the policies apart."""
    groups: dict[str, list[str]] = {}
    for name, folder in zip(names, folders, strict=True):
        digest = _digest(folder / "jobs.csv")
        if digest is not None:
            groups.setdefault(digest, []).append(name)
    same = [group for group in groups.values() if len(group) > 1]
    if not same:
        return []
    every = len(same) == 1 and len(same[0]) == len(names)
    lines = [
        f"{_spoken([esc(n) for n in group])} gave identical results: every job waited, ran "
        "and was preempted the same (the same jobs.csv), so their results and charts are the "
        "same (wall times aside)"
        for group in same
    ]
    hint = (
        " This workload does not tell these policies apart (too little contention): try one "
        "that loads the cluster more."
        if every
        else ""
    )
    return [f'<p class="same"><b>Identical runs.</b> {"; ".join(lines)}.{hint}</p>']


def _spoken(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def render_report(runs: Sequence[Path], out: Path, *, title: str) -> None:
    """Write ``out``: one self-contained HTML page showing and comparing the run folders ``runs``.

    Each folder needs ``summary.json``; ``events.jsonl`` feeds the charts (a folder
    without it gets its tables only). Raises ``DocumentError`` naming the file, and the
    line for events, when one cannot be read.
    """
    folders = [Path(folder) for folder in runs]
    summaries = [load_summary(folder / "summary.json") for folder in folders]  # fail fast
    queues = sorted({q for summary in summaries for q in _per_queue(summary)})
    colors = _Colors((q, color(i)) for i, q in enumerate(queues))
    names = _run_names(summaries, folders)
    events = [_digest(folder / "events.jsonl") for folder in folders]
    data, sections = [], []
    for i, (folder, name) in enumerate(zip(folders, names, strict=True)):
        run = read_run(folder)
        run.name = name
        same = next((names[k] for k in range(i) if events[k] and events[k] == events[i]), None)
        if same is None:
            sections.append(_run_section(i, run, colors))
        else:
            sections.append(
                f'<section id="run-{i}"><h2>{esc(name)}</h2><p class="same">The same events '
                f"as {esc(same)}, byte for byte: its charts above are this run's too.</p>"
                "</section>"
            )
        # past here only the summary and the CDFs are used
        run.jobs, run.changes, run.user_changes = {}, Changes(), Changes()
        data.append(run)
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">{len(data)} run(s): {esc(", ".join(r.name for r in data))}. '
        "Best value per row in green where lower or higher is clearly better.</p>",
        *_identical_note(names, folders),
        "<section><h2>Summary</h2>", _summary_table(data), "</section>",
        _overlays(data, colors) if len(data) > 1 else "",
        *sections,
    ]  # fmt: skip
    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(f".{out.name}.tmp")
    temporary.write_text(page, encoding="utf-8")
    os.replace(temporary, out)
