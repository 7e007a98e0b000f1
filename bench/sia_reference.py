"""Reference runs (issue 43): Sia's own simulator on its eight Philly workloads.

    make bench-sia-reference    # or:
    SIA_ARTIFACTS=PATH .venv/bin/python bench/sia_reference.py [--workloads 1-8]
        [--policies sia,pollux] [--parallel 1] [--keep DIR]

Runs the simulator of Sia (Subramanya et al., SOSP'23; ``siasosp23/artifacts``,
``sia-simulator/``) as its authors ran it, on the Philly workloads and the per-GPU-type
application profiles kept in ../shared/traces/sia-philly (or $PHALANX_TRACES), on its
default cluster (``simulator_config.py``: 6 nodes x 4 T4, 2 x 8 A100, 3 x 8 RTX 2080 Ti,
64 GPUs), with the flags of its ``run_experiment.sh``:

- ``sia``: ``multi_simulator.py --policy=sia --policy_p_val=-0.5 --mip_lambda_a=0.01
  --mip_lambda_n=1.1 --interval=60 --project_throughputs --share_max_replicas``
- ``pollux`` (heterogeneity-unaware): ``multi_simulator_unaware.py --policy=pollux
  --interval=60 --policy_p_val=-1``

The project carries none of that code: ``--artifacts`` (default $SIA_ARTIFACTS) names a
git clone of ``siasosp23/artifacts`` (bare or not; commit ``--commit``, default the
snapshot the traces came from) or a plain copy of it, and its ``sia-simulator/`` is
exported, less its ``traces/`` and ``workloads/``, into a temporary folder whose
``traces`` is a link to the profiles here; the workloads are read in place. It runs
under ``--python`` (default ``.venv-sia/bin/python``, the environment ``make
bench-sia-reference`` makes with the simulator's pinned dependencies), so that those
never move the project's.

Prints one JSON line per run (average and p99 JCT, makespan and GPU hours per job, in
hours; restarts per job; the wall time of the run, seconds), then per policy the means
over the workloads run (and the spread of the average JCT over them, the paper's ±)
beside the figures Sia's paper published (Table 3, Philly, heterogeneous 64 GPUs). p99
is taken as Sia's ``utils/print_run_stats.py`` takes it (the sorted JCTs' value at index
int(0.99 n)); the mean line's ``p99_jct_h`` pools the JCTs of every workload run, as the
paper's does. Makespan: from the first submission to the last completion.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

TRACES = Path(os.environ.get("PHALANX_TRACES", "../shared/traces"))
SIA = TRACES / "sia-philly"
#: The snapshot of siasosp23/artifacts that ../shared/traces/sia-philly came from.
COMMIT = "aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70"
INTERVAL = 60
#: Entry script and flags per policy, as sia-simulator/run_experiment.sh runs them.
COMMANDS: dict[str, list[str]] = {
    "sia": [
        "multi_simulator.py",
        "--policy=sia",
        "--policy_p_val=-0.5",
        "--mip_lambda_a=0.01",
        "--mip_lambda_n=1.1",
        f"--interval={INTERVAL}",
        "--project_throughputs",
        "--share_max_replicas",
    ],
    "pollux": [
        "multi_simulator_unaware.py",
        "--policy=pollux",
        f"--interval={INTERVAL}",
        "--policy_p_val=-1",
    ],
}
#: Sia's paper, Table 3 (Philly, heterogeneous 64 GPUs): avg JCT, p99 JCT, makespan, GPU h/job.
PUBLISHED: dict[str, dict[str, float]] = {
    "sia": {"avg_jct_h": 0.6, "p99_jct_h": 9.5, "makespan_h": 14.2, "gpu_h_per_job": 4.0},
    "pollux": {"avg_jct_h": 1.0, "p99_jct_h": 14.9, "makespan_h": 24.5, "gpu_h_per_job": 5.6},
}
#: What the export leaves out: the simulator's own copies of the traces, and byte code.
SKIPPED = ("sia-simulator/traces/", "sia-simulator/workloads/")


def _numbers(text: str) -> list[int]:
    """``1-8`` or ``1,3,5-6`` -> the workload numbers, in order, once each."""
    numbers: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        for n in range(int(first), int(last or first) + 1):
            if not 1 <= n <= 8:
                raise argparse.ArgumentTypeError(f"workload {n}: the Philly set has 1-8")
            if n not in numbers:
                numbers.append(n)
    return numbers


def _policies(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in COMMANDS:
            raise argparse.ArgumentTypeError(f"policy {name!r}: one of {', '.join(COMMANDS)}")
    return names


def export(artifacts: Path, commit: str, into: Path) -> Path:
    """Sia's ``sia-simulator/`` from ``artifacts`` into ``into``, traces linked to ours."""
    target = into / "sia-simulator"
    if (artifacts / "sia-simulator").is_dir() and not (artifacts / "HEAD").is_file():
        ignore = shutil.ignore_patterns("traces", "workloads", "__pycache__")
        shutil.copytree(artifacts / "sia-simulator", target, ignore=ignore)
    else:
        gitdir = artifacts / ".git" if (artifacts / ".git").exists() else artifacts
        git = ["git", f"--git-dir={gitdir}"]
        listing = subprocess.run(
            [*git, "ls-tree", "-r", "-z", commit, "sia-simulator"],
            check=True,
            capture_output=True,
        ).stdout.decode()
        for entry in filter(None, listing.split("\0")):
            meta, path = entry.split("\t", 1)
            _, kind, blob = meta.split()
            if kind != "blob" or path.startswith(SKIPPED) or "__pycache__" in path:
                continue
            out = into / path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(
                subprocess.run(
                    [*git, "cat-file", "blob", blob], check=True, capture_output=True
                ).stdout
            )
    (target / "traces").symlink_to((SIA / "app_profiles").resolve(), target_is_directory=True)
    return target


def _p99(values: list[float]) -> float:
    """As Sia's print_run_stats: the sorted values' entry at index int(0.99 n)."""
    ordered = sorted(values)
    return ordered[int(0.99 * len(ordered))]


def figures(log: Path, workload: Path) -> dict[str, Any]:
    """Average and p99 JCT, makespan, GPU hours and restarts per job from a run's log."""
    with workload.open() as stream:
        submits = {row["name"]: float(row["time"]) for row in csv.DictReader(stream)}
    gpu_seconds: dict[str, float] = {}
    last: dict[str, Any] = {}
    contention: list[int] = []
    with log.open() as stream:
        for line in stream:
            last = json.loads(line)
            active = 0
            for job in last["submitted_jobs"]:
                if job["completion_time"] is not None:
                    continue
                active += 1
                if job["allocation"] and job["allocation"][0] is not None:
                    gpu_type, gpus = job["allocation"]
                    gpu_seconds[gpu_type] = gpu_seconds.get(gpu_type, 0.0) + len(gpus) * INTERVAL
            contention.append(active)
    jobs = {job["name"]: job for job in last["submitted_jobs"]}
    unfinished = sorted(set(submits) - {n for n, j in jobs.items() if j["completion_time"]})
    if unfinished:
        raise RuntimeError(f"{log.name}: {len(unfinished)} jobs did not finish: {unfinished[:5]}")
    jcts = [jobs[n]["completion_time"] - jobs[n]["submission_time"] for n in submits]
    ends = [submits[n] + jct for n, jct in zip(submits, jcts, strict=True)]
    return {
        "jcts_s": jcts,
        "avg_jct_h": sum(jcts) / len(jcts) / 3600,
        "p99_jct_h": _p99(jcts) / 3600,
        "makespan_h": (max(ends) - min(submits.values())) / 3600,
        "gpu_h_per_job": sum(gpu_seconds.values()) / 3600 / len(jcts),
        "gpu_h_by_type": {k: round(v / 3600, 1) for k, v in sorted(gpu_seconds.items())},
        "restarts_per_job": sum(j["num_restarts"] or 0 for j in jobs.values()) / len(jcts),
        "contention_mean": sum(contention) / len(contention),
        "contention_max": max(contention),
    }


def run(simulator: Path, python: Path, policy: str, n: int, out: Path) -> dict[str, Any]:
    """One run of Sia's simulator: ``policy`` on Philly workload-``n``."""
    workload = (SIA / "workloads" / "philly" / f"workload-{n}.csv").resolve()
    log = out / f"{policy}-workload-{n}.log"
    script, *flags = COMMANDS[policy]
    command = [str(python), script, str(workload), *flags, f"--output={log}"]
    started = time.monotonic()
    with (out / f"{policy}-workload-{n}.stdout").open("wb") as stdout:
        done = subprocess.run(
            command, check=False, cwd=simulator, stdout=stdout, stderr=subprocess.STDOUT
        )
    wall = time.monotonic() - started
    if done.returncode != 0:
        tail = (out / f"{policy}-workload-{n}.stdout").read_bytes()[-2000:].decode(errors="replace")
        raise RuntimeError(f"{policy} on workload-{n} exited {done.returncode}:\n{tail}")
    return figures(log, workload) | {"wall_s": wall}


def _row(policy: str, name: str, result: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"bench": "sia_reference", "workload": name, "policy": policy}
    for key, value in result.items():
        if key != "jcts_s":
            row[key] = (
                round(value, 1 if key.endswith("_s") else 3) if isinstance(value, float) else value
            )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", type=_numbers, default=_numbers("1-8"))
    parser.add_argument("--policies", type=_policies, default=_policies("sia,pollux"))
    parser.add_argument("--artifacts", type=Path, default=os.environ.get("SIA_ARTIFACTS"))
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--python", type=Path, default=Path(".venv-sia/bin/python"))
    parser.add_argument("--parallel", type=int, default=1, help="runs at once")
    parser.add_argument("--keep", type=Path, help="keep the export, logs and output here")
    args = parser.parse_args()
    if args.artifacts is None:
        parser.error("name a clone of siasosp23/artifacts: --artifacts PATH or $SIA_ARTIFACTS")
    if not args.python.exists():
        parser.error(f"{args.python}: no such interpreter (make .venv-sia/bin/python)")
    python = args.python.absolute()
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="sia-reference-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        simulator = export(args.artifacts, args.commit, scratch)
        out = scratch / "out"
        out.mkdir(exist_ok=True)
        jobs = [(p, n) for n in args.workloads for p in args.policies]
        results: dict[tuple[str, int], dict[str, Any]] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.parallel) as pool:
            futures = {pool.submit(run, simulator, python, p, n, out): (p, n) for p, n in jobs}
            for future in concurrent.futures.as_completed(futures):
                policy, n = futures[future]
                results[policy, n] = future.result()
                print(json.dumps(_row(policy, f"workload-{n}", results[policy, n])), flush=True)
        for policy in args.policies:
            runs = [results[policy, n] for n in args.workloads]
            keys = ("avg_jct_h", "p99_jct_h", "makespan_h", "gpu_h_per_job", "restarts_per_job")
            mean = {k: sum(r[k] for r in runs) / len(runs) for k in keys}
            mean["avg_jct_h_std"] = statistics.pstdev(r["avg_jct_h"] for r in runs)
            mean["p99_jct_h_mean"] = mean.pop("p99_jct_h")
            mean["p99_jct_h"] = _p99([j for r in runs for j in r["jcts_s"]]) / 3600
            mean["total_wall_s"] = sum(r["wall_s"] for r in runs)
            row = _row(policy, f"mean of {len(runs)}", mean)
            print(json.dumps(row | {"published": PUBLISHED[policy]}), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
