"""The FGD paper's experiment replayed through phalanx's engine.

Weng et al., ATC '23, Fig. 9(a), as their simulator runs it
(``hkust-adsl/kubernetes-scheduler-simulator``: ``pkg/simulator/core.go``,
``simulator.go``, ``utils.go``; ``experiments/run_scripts/generate_run_scripts.py``):

- the cluster is ``openb_node_list_gpu_node.csv`` (1213 GPU nodes, 6212 GPUs: their
  ``data/prepare_input.sh`` copies only that node list; CPU-only pods share the GPU
  nodes' CPU); the pods of a workload file are
  sorted by name and shuffled with the run's seed; then, with the same generator, pods
  drawn uniformly (with replacement) from the name-sorted list are appended as copies
  until the next one would take the total requested milli-GPU past ``tune`` (1.3) x the
  cluster's (their test adds the candidate's per-card milli-GPU, not its total: kept);
- pods arrive in that order, one at a time, and are never deleted; a pod that does not
  fit is dropped, never retried;
- after each arrival the GPU allocation ratio is recorded; column k of
  ``analysis_allo_discrete.csv`` is the mean ratio over the arrivals whose arrived GPU
  request rounds to k% of the cluster (their ``merge_alloc_discrete_0920.py``).

Go's ``rand.Shuffle``/``rand.Intn`` streams cannot be reproduced in Python: the order
and the copies come from numpy's ``default_rng(seed)``, so a seed here is not the same
arrival sequence as the authors' seed; compare means over seeds.

The engine runs one session per 1% step of arrived load (``ClusterState``: the pods of
the step are added as one-task jobs whose creation time is their arrival index, so a
FIFO job order places them in arrival order, each seeing the previous ones; the binds
are applied, the rest dropped). A step is cut again before each pod of higher priority
than the pod before it: a job order by priority (``default``'s) would otherwise place
it ahead of pods that arrived earlier, which one-at-a-time arrivals never allow. For
the authors' policies (FIFO) the cuts change nothing but the number of sessions.

The authors' policies are SchedulerConfigs with the ``allocate`` action and the
``predicates`` plus one placement plugin, seeded for their random tie-break;
``default`` is ``phalanx-default`` as shipped, its evictions applied by dropping the
victims.
"""

from __future__ import annotations

import csv
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import numpy as np

from phalanx.domain.job import Job, JobPhase, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.plugins.fgd.learn import gpu_models
from phalanx.engine.plugins.fgd.workload import TaskShape, workload_distribution
from phalanx.engine.state import ClusterState
from phalanx.policies import load_policy
from phalanx.sim.traces.openb import QUEUE, load_openb, openb_nodes

OPENB: Final = "alibaba-gpu-v2023-openb"
#: Our policy name -> the authors' ``sc_policy`` label.
POLICIES: Final = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "gpuclustering": "03-GpuClustering",
    "gpupacking": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
    "default": "default",
}
COLUMNS: Final = ("workload", "sc_policy", "tune", "seed", "total_gpus")
STEPS: Final = range(131)
MILLI: Final = 1000


@dataclass(frozen=True, slots=True)
class Pod:
    """One arrival: the trace pod's job (renamed for copies) and its GPU request in milli-GPU."""

    job: Job
    gpu_milli: int
    per_card_milli: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Subsample:
    """What a ``--limit`` run replayed of the full experiment: the first ``pods`` of the
    file's ``of_pods``, on ``nodes`` of the ``of_nodes`` (evenly spread, so that the
    arrivals still reach ``tune`` x the GPUs), at most ``pods`` arrivals."""

    pods: int
    of_pods: int
    nodes: int
    of_nodes: int

    def describe(self) -> str:
        return (
            f"a subsample: the first {self.pods} of {self.of_pods} pods, on {self.nodes} of "
            f"{self.of_nodes} nodes; not comparable with the authors' full-trace figures, "
            "which are left out"
        )


#: Called after each session of a replay with (arrivals placed or dropped, arrivals).
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One policy x workload x seed: the per-arrival record and the discrete columns."""

    workload: str
    policy: str
    seed: int
    tune: float
    total_gpus: int
    arrived: np.ndarray  # milli-GPU requested by the arrivals so far, per arrival
    used: np.ndarray  # milli-GPU allocated after each arrival
    seconds: float
    evictions: int = 0
    subsample: Subsample | None = None

    def columns(self) -> dict[int, float]:
        """Column k: mean allocation ratio (%) of the arrivals at k% of the cluster's GPU."""
        return discrete_columns(self.arrived, self.used, self.total_gpus)

    def row(self) -> dict[str, object]:
        """The authors' CSV row."""
        values = self.columns()
        row: dict[str, object] = {
            "workload": f"openb_pod_list_{self.workload}",
            "sc_policy": POLICIES.get(self.policy, self.policy),
            "tune": f"{self.tune:g}",
            "seed": self.seed,
            "total_gpus": self.total_gpus,
        }
        row.update({str(k): values.get(k, "") for k in STEPS})
        return row


def discrete_columns(arrived: np.ndarray, used: np.ndarray, total_gpus: int) -> dict[int, float]:
    """The authors' 0..130 columns from per-arrival records (``merge_alloc_discrete_0920.py``):
    an arrival's step is its arrived request in % of the cluster rounded to a whole number
    (Python's ``round``, as their pandas ``apply``); a step without arrivals takes those of
    the steps beside it; steps with none there either are left out."""
    steps = np.array([round(float(a) / total_gpus / 10, 0) for a in arrived])
    ratios = np.array([round(float(u) / total_gpus / 10, 2) for u in used])
    out: dict[int, float] = {}
    for k in STEPS:
        chosen = ratios[steps == k]
        if chosen.size == 0:
            chosen = ratios[(steps >= k - 1) & (steps <= k + 1)]
        if chosen.size:
            out[k] = round(float(chosen.mean()), 2)
    return out


def arrivals(pods: Sequence[Job], cluster_milli: int, *, seed: int, tune: float) -> list[Pod]:
    """The authors' arrival sequence: the pods sorted by name and shuffled, then inflated
    with copies drawn from the name-sorted list up to ``tune`` x the cluster's milli-GPU
    (or, when they ask for more than that, pods drawn at random dropped until they do not)."""
    ordered = sorted(pods, key=lambda job: job.name)
    rng = np.random.default_rng(seed)
    base = [_pod(job) for job in ordered]
    sequence = [base[i] for i in rng.permutation(len(base))]
    total = sum(p.gpu_milli for p in sequence)
    target = tune * cluster_milli
    while total > target and sequence:  # their tuneDownPods: drop pods drawn at random
        total -= sequence.pop(int(rng.integers(len(sequence)))).gpu_milli
    copies = 0
    while total < target:
        pick = base[int(rng.integers(len(base)))]
        if total + pick.per_card_milli > target:
            break
        name = f"{pick.job.name}-tuned-{copies}"
        sequence.append(replace(pick, job=replace(pick.job, name=name)))
        total += pick.gpu_milli
        copies += 1
    return sequence


def _pod(job: Job) -> Pod:
    gpus = job.roles[0].resources.get("gpu")
    milli = round(gpus * MILLI)
    return Pod(job=job, gpu_milli=milli, per_card_milli=min(milli, MILLI))


def policy_config(policy: str, *, seed: int, target: list[dict[str, object]]) -> SchedulerConfig:
    """The SchedulerConfig of one of ``POLICIES``."""
    if policy == "default":
        return load_policy("phalanx-default").config
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    args: dict[str, object] = {"seed": seed}
    if policy == "fgd":
        args["workload"] = target
    return SchedulerConfig.build(["allocate"], [["predicates", (policy, args)]])


def typical_pods(pods: Sequence[Job]) -> list[dict[str, object]]:
    """The authors' target workload (``GetTypicalPods``, their experiments' settings: CPU
    pods included, 95% coverage, shapes by CPU, GPU and GPU model constraint) as the
    ``fgd`` workload arg."""
    shapes = [
        TaskShape(
            cpu=job.roles[0].resources.get("cpu"),
            gpu=job.roles[0].resources.get("gpu"),
            gpu_models=gpu_models(job.roles[0]),
        )
        for job in pods
    ]
    target = workload_distribution(shapes, coverage=0.95, include_cpu_only=True)
    return [
        {"cpu": shape.cpu, "gpu": shape.gpu, "popularity": float(p)}
        | ({"gpuModels": list(shape.gpu_models)} if shape.gpu_models else {})
        for shape, p in zip(target.shapes, target.popularity, strict=True)
    ]


def replay(
    nodes: Sequence[Node],
    sequence: Sequence[Pod],
    config: SchedulerConfig,
    *,
    total_gpus: int,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Arrivals through the engine, one session per 1% step (cut where priority rises);
    per-arrival arrived and used milli-GPU, and how many evictions the policy made."""
    state = ClusterState(nodes, [Queue(name=QUEUE)])
    arrived = np.cumsum([p.gpu_milli for p in sequence])
    used = np.zeros(len(sequence), dtype=np.int64)
    in_use = evictions = 0
    waiting: list[str] = []
    priorities = np.array([p.job.priority for p in sequence])
    for start, end in _sessions(arrived, priorities, total_gpus):
        index = {}
        for i in range(start, end):
            job = replace(sequence[i].job, creation_time=float(i), phase=JobPhase.PENDING)
            if state.add_job(job) is not None:
                index[job.name] = i
        decisions = state.cycle(config, now=float(end))
        gained = np.zeros(end - start, dtype=np.int64)
        for bind in decisions.binds:
            info = state.job(bind.job)
            task = info.tasks[bind.index]
            state.set_task(task, TaskPhase.BOUND, bind.node, now=float(end), gpus=bind.gpus)
            state.set_phase(bind.job, JobPhase.RUNNING)
            milli = round(float(task.request[state.snapshot.dim["gpu"]]))
            in_use += milli
            if bind.job in index:
                gained[index[bind.job] - start] += milli
        for evict in decisions.evictions:  # the default policy's: the victim is gone
            info = state.job(evict.job)
            in_use -= round(float(info.allocated[state.snapshot.dim["gpu"]]))
            state.remove_job(evict.job)
            evictions += 1
        pipelined = {p.job for p in decisions.pipelined}
        for name in [*waiting, *index]:
            if name in state.snapshot.waiting and name not in pipelined:
                state.remove_job(name)  # a pod that does not fit is dropped
        waiting = [name for name in pipelined if name in state.snapshot.jobs]
        before = used[start - 1] if start else 0
        used[start:end] = before + np.cumsum(gained)
        used[end - 1] = in_use  # evictions and late binds show at the step's end
        if progress is not None:
            progress(end, len(sequence))
    return arrived, used, evictions


def _sessions(
    arrived: np.ndarray, priorities: np.ndarray, total_gpus: int
) -> Iterator[tuple[int, int]]:
    """The arrivals of each session: a step's (``_steps``), cut before every arrival of
    higher priority than the one before it, so that no job order by priority places a
    pod ahead of one that arrived earlier."""
    rises = np.flatnonzero(np.diff(priorities) > 0) + 1
    for start, end in _steps(arrived, total_gpus):
        inside = rises[(rises > start) & (rises < end)].tolist()
        yield from itertools.pairwise([start, *inside, end])


def _steps(arrived: np.ndarray, total_gpus: int) -> Iterator[tuple[int, int]]:
    """Consecutive arrivals grouped by the whole percent of the cluster they bring it to."""
    key = np.floor(arrived / (total_gpus * 10.0)).astype(np.int64)
    bounds = np.flatnonzero(np.diff(key)) + 1
    edges = [0, *bounds.tolist(), len(arrived)]
    for start, end in itertools.pairwise(edges):
        if end > start:
            yield start, end


def run_one(
    traces_dir: Path,
    workload: str,
    policy: str,
    seed: int,
    *,
    tune: float = 1.3,
    limit: int | None = None,
    progress: Progress | None = None,
) -> Run:
    """One replay. ``limit`` makes it a subsample of at most that many arrivals: the first
    pods of the file, on an evenly spread share of the nodes that they fill to ``tune``."""
    folder = traces_dir / OPENB / "csv"
    nodes: Sequence[Node] = openb_nodes(folder / "openb_node_list_gpu_node.csv")
    pods = [w.job for w in load_openb(folder / f"openb_pod_list_{workload}.csv").jobs]
    subsample = None
    if limit is not None:
        subsample, nodes, pods = _subsample(nodes, pods, limit, tune)
    total_gpus = int(sum(len(node.gpus) for node in nodes))
    sequence = arrivals(pods, total_gpus * MILLI, seed=seed, tune=tune)
    if limit is not None:
        cut = len(sequence) > limit
        sequence = sequence[:limit]
        assert subsample is not None
        if (
            not cut
            and subsample.pods == subsample.of_pods
            and subsample.nodes == subsample.of_nodes
        ):
            subsample = None  # the limit is above the whole experiment: a full run
    config = policy_config(policy, seed=seed, target=typical_pods(pods))
    started = time.perf_counter()
    arrived, used, evictions = replay(
        nodes, sequence, config, total_gpus=total_gpus, progress=progress
    )
    return Run(
        workload=workload,
        policy=policy,
        seed=seed,
        tune=tune,
        total_gpus=total_gpus,
        arrived=arrived,
        used=used,
        seconds=time.perf_counter() - started,
        evictions=evictions,
        subsample=subsample,
    )


def _subsample(
    nodes: Sequence[Node], pods: Sequence[Job], limit: int, tune: float
) -> tuple[Subsample, list[Node], list[Job]]:
    """The first ``limit`` pods, and evenly spread nodes with about the GPUs that ``limit``
    arrivals of them ask for, divided by ``tune`` (so the load still reaches ``tune``)."""
    kept = list(pods[:limit])
    per_pod = float(np.mean([_pod(job).gpu_milli for job in kept])) if kept else 0.0
    gpus = np.array([len(node.gpus) for node in nodes], dtype=np.float64)
    share = min(1.0, limit * per_pod / MILLI / tune / max(float(gpus.sum()), 1.0))
    count = min(len(nodes), max(1, round(share * len(nodes))))
    chosen = np.unique(np.linspace(0, len(nodes) - 1, count).round().astype(np.intp))
    picked = [nodes[int(i)] for i in chosen]
    return (
        Subsample(pods=len(kept), of_pods=len(pods), nodes=len(picked), of_nodes=len(nodes)),
        picked,
        kept,
    )


def write_csv(path: Path, rows: Sequence[dict[str, object]]) -> None:
    """The authors' ``analysis_allo_discrete.csv`` layout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=[*COLUMNS, *(str(k) for k in STEPS)])
        writer.writeheader()
        writer.writerows(rows)


def read_expected(traces_dir: Path) -> list[dict[str, str]]:
    """The authors' cached ``analysis_allo_discrete.csv`` rows."""
    path = traces_dir / OPENB / "fgd_expected_results" / "analysis_allo_discrete.csv"
    with path.open(newline="") as source:
        return list(csv.DictReader(source))
