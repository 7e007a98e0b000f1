"""Model check (issue 43): phalanx's simulator against Sia's on the same jobs at fixed size.

    make bench-sia-check    # or:
    SIA_ARTIFACTS=PATH .venv/bin/python bench/sia_check.py [--workloads 1-2]
        [--types aws,dgx-ext,rtx] [--interval 600] [--keep DIR] [--sia-from DIR]

What it isolates: the model (how fast a fixed-size job trains on each GPU type, what a
start costs, how progress is counted), not a policy. Each Philly workload (as
bench/sia_reference.py reads it) is rewritten into a rigid variant per GPU type: every
row ``category: rigid`` (Sia then fixes its GPU count and batch at the row's and knows its
throughput on each type from the start, ``Job.seed_profiles_rigid``), and the jobs
submitted one after another, in the file's order, each long enough after the one before
for that one to have ended (``spaced``: 2.5 times phalanx's estimate of its run on that
type, plus 10 minutes, on the boundary of one of Sia's rounds), so no job ever waits or
shares the cluster. Both simulators then run it on a cluster of that one type only, the
type's nodes of Sia's cluster (6 x 4 T4, 2 x 8 A100 or 3 x 8 RTX 2080 Ti):

- Sia's simulator under its ``sia`` policy with the flags of its ``run_experiment.sh``
  (bench/sia_reference.py's ``COMMANDS``), its ``simulator_config.cluster_nnodes`` set to
  the one type by a small driver before ``multi_simulator.py`` runs; a lone rigid job
  gets its row's GPUs on that type at the round it arrives, packed on whole nodes first
  (``alloc_to_placement_fast``), and keeps them to the end;
- phalanx's (``Simulation``, as ``phalanx sim run --workload pollux:FILE --profiles DIR``
  loads the file) under ``fifo``, which has no elastic action: each job runs at its row's
  size and batch, at its GPU type's speed (``phalanx.sim.gpu_types.fixed_speed``), with
  sessions on the minute (``SimOptions.fixed_period``).

The pair is fair because neither policy has a choice to make: one job, one type, room for
it at once; what differs is only how each simulator turns (application, type, GPUs,
batch) into a JCT. Sia's rounds are ``--interval`` seconds (default 600, not its 60: a lone
job's JCT does not depend on it, since it arrives on a round's boundary and Sia counts its
progress and completion to the second within a round; 60 gives the same JCTs, more slowly).
The run checks that the premise held: Sia's log never shows two jobs active at once, no
job waited in phalanx's longer than a session period (none did: they arrive on one), and
no job restarted in either.

Prints one JSON line per (workload, type): both average JCTs (seconds) and their relative
difference (``diff``: phalanx / Sia - 1); then phalanx's average with Sia's per-application
constants put in, job by job, from phalanx's own run: its training time (JCT less its wait
and its start) at Sia's calibration slowdown (``simulator_config.SLOWDOWNS``) in place of
phalanx's own (``calibration``, read off its curves: 1 until phalanx took Sia's), its
start replaced by Sia's restart time (``Application.rescale_time``), each alone
(``diff_with_sia_slowdowns``, ``diff_with_sia_restarts``) and both (``adjusted``), the
constants read from Sia's code by the driver; ``rounded``: phalanx's seconds per epoch
slowed and rounded to a whole second each as Sia's ``Job.step`` does, plus Sia's restart
time, and the jobs for which that gives Sia's JCT to the second; and the jobs whose
adjusted JCT differs most. Then per type and overall the means over the workloads, and
per (application, type) Sia's training time over phalanx's (mean and extremes) beside
the ratio of the two simulators' slowdowns: where the throughput models agree, the two
are equal.

``--keep DIR`` keeps the export, the rigid workloads and Sia's logs; ``--sia-from DIR``
reads an earlier run's rigid workloads and Sia's runs of them back instead of running Sia
again (they do not depend on phalanx's model), so a change to phalanx's model is checked
in a minute.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sia_reference import COMMANDS, COMMIT, SIA, _numbers, export, figures

#: Sia's GPU types (its profile suffixes) in the order of its default cluster.
TYPES: Final = ("aws", "dgx-ext", "rtx")
#: A job's gap to the next: this many times phalanx's estimate of its run, plus PAD seconds
#: (Sia's slowdown is at most 1.8 and its longest restart 250 s).
FACTOR: Final = 2.5
PAD: Final = 600.0
#: Sia's rounds, seconds (see the module docstring).
INTERVAL: Final = 600
POLICY: Final = "fifo"
#: The longest a job may wait in phalanx's run for the premise to hold: one session period.
MAX_WAIT: Final = 60.0

#: Runs Sia's multi_simulator.py on a cluster of one type, after writing Sia's own
#: per-application constants (restart time, calibration slowdown) for that type to a file.
DRIVER: Final = '''"""phalanx bench/sia_check.py: multi_simulator.py on one GPU type."""
import json
import runpy
import sys

import simulator_config

gpu_type, nodes, constants = sys.argv[1], int(sys.argv[2]), sys.argv[3]
simulator_config.cluster_nnodes = {gpu_type: nodes}
from applications import APPLICATIONS

with open(constants, "w") as stream:
    json.dump({name: {"restart_s": app.rescale_time,
                      "slowdown": simulator_config.SLOWDOWNS[name]}
               for name, app in APPLICATIONS[gpu_type].items()}, stream)
sys.argv = ["multi_simulator.py", *sys.argv[4:]]
runpy.run_path("multi_simulator.py", run_name="__main__")
'''


@dataclass(frozen=True, slots=True)
class JobRun:
    """One job's run in one simulator: its JCT and what it spent before training, s."""

    name: str
    application: str
    gpus: int
    jct: float
    waited: float  # from submission to its first start
    restart: float  # spent at its start before it progressed
    #: how many times slower than its profiled curves it trained (Sia's calibration, or
    #: phalanx's own: ``calibration``)
    slowdown: float = 1.0


def type_model(gpu_type: str) -> tuple[str, int]:
    """(phalanx's GPU model, nodes) of Sia's ``gpu_type`` in Sia's default cluster."""
    from phalanx.sim.traces.sia import SIA_GROUPS, suffix_model

    model = suffix_model(gpu_type)
    nodes = next(count for _, count, name, *_ in SIA_GROUPS if name == model)
    return model, nodes


def spaced(
    seconds: Sequence[float], *, interval: int, factor: float = FACTOR, pad: float = PAD
) -> list[int]:
    """Submission times for jobs that run ``seconds`` each, one after another: the first
    at ``interval`` (Sia's first round), each next one ``factor`` times the run before
    it plus ``pad`` later, rounded up to a whole round."""
    submits: list[int] = []
    at = interval
    for run in seconds:
        submits.append(at)
        at += math.ceil((factor * run + pad) / interval) * interval
    return submits


def rigid_rows(rows: Sequence[Mapping[str, str]], submits: Sequence[int]) -> list[dict[str, str]]:
    """``rows`` of a Philly workload, each ``category: rigid`` (its own column, replacing any)
    and submitted at the matching entry of ``submits``; every other cell as it was."""
    if len(rows) != len(submits):
        raise ValueError(f"{len(rows)} rows for {len(submits)} submission times")
    return [
        {**row, "time": str(at), "category": "rigid"} for row, at in zip(rows, submits, strict=True)
    ]


def write_rows(path: Path, rows: Sequence[Mapping[str, str]]) -> None:
    """``rows`` as a CSV file with a header, columns in the first row's order."""
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def calibration(profile: Any, folder: Path) -> float:
    """How many times slower than its profiled curves phalanx trains a job of ``profile``
    (an ``AppProfile`` of the application folder ``folder``): its one-GPU step at the
    smallest local batch over that of the file it was read from (``placements-<suffix>.csv``
    of its GPU type, ``placements.csv`` for the default curves); 1 where either lacks it."""
    from phalanx.sim.traces.sia import PROFILE_SUFFIXES

    suffixes = {model: suffix for suffix, model in PROFILE_SUFFIXES.items()}
    suffix = suffixes.get(profile.gpu_model, profile.gpu_model)
    path = folder / (f"placements-{suffix}.csv" if suffix else "placements.csv")
    with path.open(newline="") as stream:
        ones = [r for r in csv.DictReader(stream) if r["placement"].strip() == "1"]
    curve = profile.placements.get(1)
    if not ones or curve is None:
        return 1.0
    first = min(ones, key=lambda r: float(r["local_bsz"]))
    local, step, _ = curve
    at = [i for i, b in enumerate(local) if float(b) == float(first["local_bsz"])]
    return float(step[at[0]]) / float(first["step_time"]) if at else 1.0


def epoch_seconds(workload: Path, model: str) -> dict[str, tuple[list[float], float]]:
    """Per job of ``workload``: phalanx's seconds for each epoch of its run alone on
    ``model`` GPUs packed on whole nodes (``packed_on``), at its row's size and batch (the
    terms whose sum is ``fixed_seconds``, by that type's curves, the default ones where
    they cannot say; one term, its duration, where neither can), and the ``calibration``
    of the curves used."""
    import numpy as np

    from phalanx.sim.elastic.batch import fixed_batch
    from phalanx.sim.elastic.progress import gains
    from phalanx.sim.elastic.throughput import iteration_seconds
    from phalanx.sim.gpu_types import packed_on
    from phalanx.sim.traces.pollux import load_pollux

    folder = SIA / "app_profiles"
    found: dict[str, tuple[list[float], float]] = {}
    for job in load_pollux(workload, profiles_dir=folder).jobs:
        progress = job.elastic
        assert progress is not None, "a Philly job carries its profiles"
        gpus = sum(role.replicas for role in job.job.roles)
        found[job.job.name] = ([job.duration], 1.0)
        for profile in (progress.on(model), progress.profile):
            if profile is None:
                continue
            placement = packed_on(profile, gpus)
            config = fixed_batch(profile, gpus, progress.batch_size)
            step = iteration_seconds(
                profile, placement, config.atomic, config.accumulation, interpolate=True
            )
            gain = gains(profile, config.batch)
            if step is not None and gain is not None and config.atomic >= 1:
                per_epoch = np.diff(profile.progress, prepend=0.0) * step / gain
                factor = calibration(profile, folder / profile.name)
                found[job.job.name] = ([float(t) for t in per_epoch], factor)
                break
    return found


def rounded_jct(epochs: Sequence[float], slowdown: float, restart: float) -> float:
    """A lone job's JCT as Sia's ``Job.step`` counts it from ``epochs`` (seconds of each at
    full speed): ``restart`` seconds, then each epoch slowed by ``slowdown`` and its end
    rounded to a whole second (``delta = round(...)``)."""
    return restart + sum(round(slowdown * t) for t in epochs)


def rigid_workload(source: Path, target: Path, model: str, interval: int) -> Path:
    """``source``'s rigid variant for one GPU type, spaced so no job waits, at ``target``."""
    with source.open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    epochs = epoch_seconds(source, model)
    seconds = [sum(epochs[row["name"]][0]) for row in rows]
    write_rows(target, rigid_rows(rows, spaced(seconds, interval=interval)))
    return target


def sia_flags(interval: int) -> list[str]:
    """multi_simulator.py's flags for the ``sia`` policy, its rounds ``interval`` seconds."""
    script, *flags = COMMANDS["sia"]
    assert script == "multi_simulator.py"
    return [f"--interval={interval}" if f.startswith("--interval=") else f for f in flags]


def run_sia(
    simulator: Path, python: Path, workload: Path, gpu_type: str, interval: int, out: Path
) -> tuple[dict[str, JobRun], dict[str, Any]]:
    """Sia's simulator on ``workload`` on a cluster of ``gpu_type`` only: per job its run,
    Sia's constants per application (``slowdowns``, ``restarts``) and the run's wall time."""
    _, nodes = type_model(gpu_type)
    stem = f"{workload.stem}-sia"
    log, constants = out / f"{stem}.log", out / f"{stem}-constants.json"
    driver = simulator / "_phalanx_sia_check.py"
    driver.write_text(DRIVER)
    command = [str(python), driver.name, gpu_type, str(nodes), str(constants), str(workload)]
    started = time.monotonic()
    with (out / f"{stem}.stdout").open("wb") as stdout:
        done = subprocess.run(
            ["nice", "-n", "5", *command, *sia_flags(interval), f"--output={log}"],
            check=False,
            cwd=simulator,
            stdout=stdout,
            stderr=subprocess.STDOUT,
        )
    wall = time.monotonic() - started
    if done.returncode != 0:
        tail = (out / f"{stem}.stdout").read_bytes()[-2000:].decode(errors="replace")
        raise RuntimeError(f"Sia's simulator on {workload.name} exited {done.returncode}:\n{tail}")
    runs, extra = read_sia(workload, out)
    return runs, extra | {"wall_s": wall}


def read_sia(workload: Path, out: Path) -> tuple[dict[str, JobRun], dict[str, Any]]:
    """The run of Sia's simulator on ``workload`` that ``run_sia`` left in ``out``: per job
    its run, and Sia's constants per application (``slowdowns``, ``restarts``). Raises
    RuntimeError where two jobs overlapped or one restarted."""
    stem = f"{workload.stem}-sia"
    log, constants = out / f"{stem}.log", out / f"{stem}-constants.json"
    result = figures(log, workload)
    if result["contention_max"] > 1:
        raise RuntimeError(f"{workload.name}: jobs overlapped in Sia's run; space them more")
    constant = json.loads(constants.read_text())
    with log.open() as stream:
        *_, last = stream
    runs: dict[str, JobRun] = {}
    for job in json.loads(last)["submitted_jobs"]:
        application = job["name"].rsplit("-", 1)[0]
        if job["num_restarts"]:
            raise RuntimeError(f"{job['name']} restarted in Sia's run")
        runs[job["name"]] = JobRun(
            name=job["name"],
            application=application,
            gpus=int(sum(job["placement"])),
            jct=job["completion_time"] - job["submission_time"],
            waited=0.0,
            restart=float(constant[application]["restart_s"]),
            slowdown=float(constant[application]["slowdown"]),
        )
    slowdowns = {app: float(c["slowdown"]) for app, c in constant.items()}
    restarts = {app: float(c["restart_s"]) for app, c in constant.items()}
    return runs, {"slowdowns": slowdowns, "restarts": restarts}


def run_phalanx(
    workload: Path, gpu_type: str, calibrations: Mapping[str, float] | None = None
) -> dict[str, JobRun]:
    """phalanx's simulator on ``workload`` on the nodes of ``gpu_type`` in the ``sia``
    cluster, under ``fifo`` with sessions on the minute: per job its run, its slowdown
    the job's entry in ``calibrations`` (1 where none)."""
    from phalanx.domain.node import GPU_MODEL_LABEL
    from phalanx.policies import load_policy
    from phalanx.sim.runner import SimOptions, Simulation
    from phalanx.sim.traces.pollux import load_pollux
    from phalanx.sim.traces.sia import sia_nodes

    model, _ = type_model(gpu_type)
    nodes = tuple(node for node in sia_nodes() if node.labels.get(GPU_MODEL_LABEL) == model)
    loaded = load_pollux(workload, profiles_dir=SIA / "app_profiles")
    specs = {job.job.name: job for job in loaded.jobs}
    sim = Simulation(
        nodes, loaded, load_policy(POLICY).config, options=SimOptions(fixed_period=True)
    )
    metrics = sim.run()
    runs: dict[str, JobRun] = {}
    for name, record in metrics.jobs.items():
        if record.jct is None or record.queue_delay is None or record.restarts:
            raise RuntimeError(f"{name}: {record.outcome} after {record.restarts} restarts")
        if record.queue_delay > MAX_WAIT:
            raise RuntimeError(f"{name} waited {record.queue_delay:.0f} s in phalanx's run")
        spec = specs[name]
        runs[name] = JobRun(
            name=name,
            application=name.rsplit("-", 1)[0],
            gpus=int(record.gpus),
            jct=record.jct,
            waited=record.queue_delay,
            restart=spec.restart_delay,
            slowdown=(calibrations or {}).get(name, 1.0),
        )
    return runs


def adjusted(
    run: JobRun,
    slowdowns: Mapping[str, float],
    restarts: Mapping[str, float],
    *,
    slowdown: bool = True,
    restart: bool = True,
) -> float:
    """``run``'s JCT had phalanx used Sia's per-application constants: its wait, its
    training time (JCT less its wait and its start) at Sia's slowdown in place of its own
    (with ``slowdown``), and Sia's restart time in place of its own (with ``restart``)."""
    training = run.jct - run.waited - run.restart
    factor = slowdowns[run.application] / run.slowdown if slowdown else 1.0
    start = restarts[run.application] if restart else run.restart
    return run.waited + training * factor + start


def diff(value: float, reference: float) -> float:
    """``value`` relative to ``reference``: value / reference - 1."""
    return value / reference - 1


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean of ``values`` (at least one)."""
    listed = list(values)
    return sum(listed) / len(listed)


def compare(
    sia: Mapping[str, JobRun],
    phalanx: Mapping[str, JobRun],
    slowdowns: Mapping[str, float],
    restarts: Mapping[str, float],
    rounded: Mapping[str, float] | None = None,
    *,
    worst: int = 3,
) -> dict[str, Any]:
    """The two simulators' runs of the same jobs: both average JCTs and the difference of
    phalanx's to Sia's (``diff``); phalanx's with Sia's slowdowns only, its restart times
    only, and both (``adjusted``), each with its difference; where given, ``rounded`` (per
    job, ``rounded_jct`` of phalanx's epochs), its difference and the jobs it gives to the
    second (within 1 s of Sia's JCT); and the ``worst`` jobs by
    the adjusted difference. Raises ValueError unless both ran the same jobs on the same
    GPU counts."""
    if set(sia) != set(phalanx):
        raise ValueError(f"different jobs: {sorted(set(sia) ^ set(phalanx))[:5]}")
    sizes = [name for name in sia if sia[name].gpus != phalanx[name].gpus]
    if sizes:
        raise ValueError(f"different GPU counts: {sizes[:5]}")
    names = sorted(sia)
    sia_avg = mean(sia[n].jct for n in names)
    phalanx_avg = mean(phalanx[n].jct for n in names)
    fixed = {n: adjusted(phalanx[n], slowdowns, restarts) for n in names}
    row: dict[str, Any] = {
        "jobs": len(names),
        "sia_avg_jct_s": round(sia_avg, 1),
        "phalanx_avg_jct_s": round(phalanx_avg, 1),
        "diff": round(diff(phalanx_avg, sia_avg), 4),
    }
    for key, slowdown, restart in (("sia_slowdowns", True, False), ("sia_restarts", False, True)):
        avg = mean(
            adjusted(phalanx[n], slowdowns, restarts, slowdown=slowdown, restart=restart)
            for n in names
        )
        row[f"diff_with_{key}"] = round(diff(avg, sia_avg), 4)
    adjusted_avg = mean(fixed.values())
    row["phalanx_adjusted_avg_jct_s"] = round(adjusted_avg, 1)
    row["adjusted_diff"] = round(diff(adjusted_avg, sia_avg), 4)
    if rounded is not None:
        rounded_avg = mean(rounded[n] for n in names)
        row["phalanx_rounded_avg_jct_s"] = round(rounded_avg, 1)
        row["rounded_diff"] = round(diff(rounded_avg, sia_avg), 4)
        row["rounded_exact_jobs"] = sum(abs(rounded[n] - sia[n].jct) <= 1.0 for n in names)
    ranked = sorted(names, key=lambda n: abs(diff(fixed[n], sia[n].jct)), reverse=True)
    row["worst_adjusted"] = [
        {
            "job": n,
            "gpus": sia[n].gpus,
            "sia_jct_s": round(sia[n].jct, 1),
            "phalanx_jct_s": round(phalanx[n].jct, 1),
            "adjusted_jct_s": round(fixed[n], 1),
            "adjusted_diff": round(diff(fixed[n], sia[n].jct), 4),
            **({} if rounded is None else {"rounded_jct_s": round(rounded[n], 1)}),
        }
        for n in ranked[:worst]
    ]
    return row


def means(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Over ``rows`` of ``compare`` (with ``rounded``): the mean of each average JCT and
    the difference of the means, and whether phalanx's own is within 5% of Sia's."""
    sia = mean(r["sia_avg_jct_s"] for r in rows)
    found: dict[str, Any] = {"workload": f"mean of {len(rows)}", "sia_avg_jct_s": round(sia, 1)}
    for key, name in (
        ("phalanx_avg_jct_s", "diff"),
        ("phalanx_adjusted_avg_jct_s", "adjusted_diff"),
        ("phalanx_rounded_avg_jct_s", "rounded_diff"),
    ):
        value = mean(r[key] for r in rows)
        found[key] = round(value, 1)
        found[name] = round(diff(value, sia), 4)
    found["within_5pct"] = abs(found["diff"]) <= 0.05
    return found


def training_ratios(
    pairs: Iterable[tuple[str, JobRun, JobRun]],
) -> dict[tuple[str, str], dict[str, float]]:
    """Per (application, type), over ``pairs`` of (type, Sia's run, phalanx's run) of one
    job: the jobs, the mean and extremes of Sia's training time over phalanx's (JCT less
    wait and start), and the mean of Sia's slowdown over phalanx's: the two are equal
    where the two throughput models agree."""
    grouped: dict[tuple[str, str], list[float]] = {}
    expected: dict[tuple[str, str], list[float]] = {}
    for gpu_type, sia, phalanx in pairs:
        expected.setdefault((sia.application, gpu_type), []).append(sia.slowdown / phalanx.slowdown)
        ratio = (sia.jct - sia.waited - sia.restart) / (
            phalanx.jct - phalanx.waited - phalanx.restart
        )
        grouped.setdefault((sia.application, gpu_type), []).append(ratio)
    return {
        key: {
            "jobs": len(r),
            "mean": mean(r),
            "min": min(r),
            "max": max(r),
            "slowdowns": mean(expected[key]),
        }
        for key, r in sorted(grouped.items())
    }


def _types(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in TYPES:
            raise argparse.ArgumentTypeError(f"type {name!r}: one of {', '.join(TYPES)}")
    return names


def check(
    n: int, gpu_type: str, args: argparse.Namespace, simulator: Path, out: Path
) -> tuple[dict[str, Any], list[tuple[str, JobRun, JobRun]], dict[str, float]]:
    """Workload ``n`` on ``gpu_type`` in both simulators (Sia's read from ``--sia-from``
    where given): the row ``compare`` makes of it, each job's pair of runs, and Sia's
    slowdowns."""
    model, _ = type_model(gpu_type)
    name = f"workload-{n}-{gpu_type}.csv"
    if args.sia_from is not None:
        rigid = (args.sia_from / "out" / name).resolve()
        sia, extra = read_sia(rigid, rigid.parent)
    else:
        source = SIA / "workloads" / "philly" / f"workload-{n}.csv"
        rigid = rigid_workload(source, out / name, model, args.interval).resolve()
        python = args.python.absolute()
        sia, extra = run_sia(simulator, python, rigid, gpu_type, args.interval, out)
    epochs = epoch_seconds(rigid, model)
    started = time.monotonic()
    phalanx = run_phalanx(rigid, gpu_type, {job: f for job, (_, f) in epochs.items()})
    phalanx_wall = time.monotonic() - started
    slowdowns: dict[str, float] = extra["slowdowns"]
    rounded = {
        job: rounded_jct(
            [t / phalanx[job].slowdown for t in epochs[job][0]],
            slowdowns[run.application],
            run.restart,
        )
        for job, run in sia.items()
    }
    row = {
        "bench": "sia_check",
        "workload": f"workload-{n}",
        "type": gpu_type,
        "model": model,
        **compare(sia, phalanx, slowdowns, extra["restarts"], rounded),
        "phalanx_max_wait_s": max(run.waited for run in phalanx.values()),
        "sia_wall_s": round(extra["wall_s"], 1) if "wall_s" in extra else None,
        "phalanx_wall_s": round(phalanx_wall, 1),
    }
    return row, [(gpu_type, sia[job], phalanx[job]) for job in sorted(sia)], slowdowns


def report(
    rows: Sequence[Mapping[str, Any]],
    pairs: Iterable[tuple[str, JobRun, JobRun]],
    types: Sequence[str],
    slowdowns: Mapping[str, float],
) -> None:
    """Print the means per type and over all, then the training ratios per (application,
    type), one JSON line each."""
    for gpu_type in [*types, "all"]:
        picked = [r for r in rows if gpu_type in ("all", r["type"])]
        print(json.dumps({"bench": "sia_check", "type": gpu_type, **means(picked)}), flush=True)
    for (application, gpu_type), ratio in training_ratios(pairs).items():
        line = {
            "bench": "sia_check",
            "application": application,
            "type": gpu_type,
            "jobs": ratio["jobs"],
            "training_ratio_mean": round(ratio["mean"], 4),
            "training_ratio_min": round(ratio["min"], 4),
            "training_ratio_max": round(ratio["max"], 4),
            "sia_slowdown": slowdowns.get(application),
            "sia_over_phalanx_slowdown": round(ratio["slowdowns"], 4),
        }
        print(json.dumps(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", type=_numbers, default=_numbers("1-8"))
    parser.add_argument("--types", type=_types, default=list(TYPES))
    parser.add_argument("--interval", type=int, default=INTERVAL, help="Sia's rounds, s")
    parser.add_argument("--artifacts", type=Path, default=os.environ.get("SIA_ARTIFACTS"))
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--python", type=Path, default=Path(".venv-sia/bin/python"))
    parser.add_argument("--keep", type=Path, help="keep the export, workloads and logs here")
    parser.add_argument(
        "--sia-from",
        type=Path,
        help="a --keep folder of an earlier run: its rigid workloads and Sia's runs of them "
        "are read, not made again (they do not change with phalanx's model)",
    )
    args = parser.parse_args()
    if args.sia_from is None:
        if args.artifacts is None:
            parser.error("name a clone of siasosp23/artifacts: --artifacts PATH or $SIA_ARTIFACTS")
        if not args.python.exists():
            parser.error(f"{args.python}: no such interpreter (make .venv-sia/bin/python)")
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="sia-check-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        simulator = scratch / "sia-simulator"
        if args.sia_from is None:
            shutil.rmtree(simulator, ignore_errors=True)  # a --keep folder's
            simulator = export(args.artifacts, args.commit, scratch)
        out = scratch / "out"
        out.mkdir(exist_ok=True)
        rows: list[dict[str, Any]] = []
        pairs: list[tuple[str, JobRun, JobRun]] = []
        slowdowns: dict[str, float] = {}
        for n in args.workloads:
            for gpu_type in args.types:
                row, paired, slowdowns = check(n, gpu_type, args, simulator, out)
                rows.append(row)
                pairs.extend(paired)
                print(json.dumps(row), flush=True)
        report(rows, pairs, args.types, slowdowns)
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
