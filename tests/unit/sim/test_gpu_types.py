"""GPU types end to end: Sia's per-type profiles, the ``sia`` preset, speed by type.

The profiles are read in place from ``sia-philly/app_profiles`` (skipped when absent);
the workloads are tiny traces written by the tests.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.node import GPU_MODEL_LABEL, Node
from phalanx.policies import load_policy
from phalanx.sim.clusters import cluster_preset
from phalanx.sim.elastic.observe import StepLog
from phalanx.sim.elastic.tracker import ElasticRun
from phalanx.sim.gpu_types import bootstrap_rows, choose
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces import load_workload
from phalanx.sim.traces.pollux import load_pollux, read_gpu_profiles, read_profile
from phalanx.sim.traces.sia import PROFILE_SUFFIXES, sia_nodes

pytestmark = pytest.mark.traces


def _trace(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "workload.csv"
    path.write_text("name,time,application,num_replicas,batch_size\n" + "\n".join(rows) + "\n")
    return path


def _node(model: str) -> Node:
    """The first node of ``sia``'s with GPU ``model``."""
    return next(n for n in sia_nodes() if n.labels[GPU_MODEL_LABEL] == model)


def _run(nodes: list[Node], path: Path, profiles: Path, policy: str) -> dict[str, object]:
    workload = load_pollux(path, profiles_dir=profiles)
    sim = Simulation(nodes, workload, load_policy(policy).config, options=SimOptions())
    return sim.run().summary(sim_wall_s=0.0)


def test_the_loader_reads_each_types_curves(profiles: Path) -> None:
    by_model = read_gpu_profiles(profiles / "cifar10")
    assert {"T4", "A100", "RTX2080Ti", "V100", "RTX6000"} <= set(by_model)
    assert set(PROFILE_SUFFIXES.values()) <= set(by_model)
    assert "dgx" in by_model  # a suffix Sia's table does not name is a model of its own
    default = read_profile(profiles / "cifar10")
    t4, a100 = by_model["T4"], by_model["A100"]
    assert (t4.gpu_model, a100.gpu_model, default.gpu_model) == ("T4", "A100", "")
    # aws (T4) is the un-suffixed profile; every type shares the validation
    assert t4.placements.keys() == default.placements.keys()
    assert all(np.array_equal(t4.placements[k][1], v[1]) for k, v in default.placements.items())
    assert np.array_equal(a100.progress, default.progress)
    assert a100.max_local_batch > default.max_local_batch  # more memory, larger local batch
    assert a100.placements[1][1][0] < t4.placements[1][1][0]  # one A100 steps faster


def test_jobs_carry_their_curves_per_type(profiles: Path, tmp_path: Path) -> None:
    path = _trace(tmp_path, "c-0,0,cifar10,4,512", "b-1,5,bert,2,12")
    workload = load_pollux(path, profiles_dir=profiles)
    for item in workload.jobs:
        assert item.elastic is not None
        assert {"T4", "A100", "RTX2080Ti"} <= set(item.elastic.by_model)
    assert any("GPU type" in note for note in workload.notes)
    via_spec = load_workload(f"pollux:{path}", profiles_dir=profiles)
    assert via_spec.jobs[0].elastic is not None and via_spec.jobs[0].elastic.by_model


def test_profiles_are_refused_for_other_formats(profiles: Path, tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="profiles"):
        load_workload("tiresias:x.csv", profiles_dir=profiles)


def test_the_sia_preset_has_sias_64_gpus() -> None:
    nodes = cluster_preset("sia")
    gpus: dict[str, float] = {}
    for node in nodes:
        model = node.labels[GPU_MODEL_LABEL]
        gpus[model] = gpus.get(model, 0.0) + node.capacity.get("gpu")
        assert all(card.model == model for card in node.gpus)
    assert gpus == {"T4": 24, "A100": 16, "RTX2080Ti": 24}
    assert len(nodes) == 11


@pytest.mark.parametrize("policy", ["tiresias-pollux", "pollux"])
def test_the_same_job_runs_faster_on_a100_than_on_t4(
    profiles: Path, tmp_path: Path, policy: str
) -> None:
    """Fixed-size (tiresias-pollux) and elastic (pollux) alike."""
    path = _trace(tmp_path, "c-0,0,cifar10,4,512")
    on_t4 = _run([_node("T4")], path, profiles, policy)
    on_a100 = _run([_node("A100")], path, profiles, policy)
    assert on_t4["finished"] == on_a100["finished"] == 1
    assert isinstance(on_t4["avg_jct_s"], float) and isinstance(on_a100["avg_jct_s"], float)
    assert on_a100["avg_jct_s"] < 0.8 * on_t4["avg_jct_s"]
    assert on_a100["gpu_type_jobs"] == {"A100": 1}
    assert on_a100["gpu_type_fallback_jobs"] == on_a100["gpu_type_mixed_jobs"] == 0


def test_a_fixed_size_job_on_t4_runs_its_duration(profiles: Path, tmp_path: Path) -> None:
    """The T4 curves are the default ones: at the reference packing its speed is 1."""
    path = _trace(tmp_path, "c-0,0,cifar10,4,512")
    workload = load_pollux(path, profiles_dir=profiles)
    summary = _run([_node("T4")], path, profiles, "tiresias-pollux")
    restart = workload.jobs[0].restart_delay
    # it starts at the session a second after it arrives
    assert summary["avg_jct_s"] == pytest.approx(workload.jobs[0].duration + restart + 1, abs=0.5)


def test_a_type_without_curves_falls_back_and_is_counted(profiles: Path, tmp_path: Path) -> None:
    path = _trace(tmp_path, "c-0,0,cifar10,4,512")
    t4 = _node("T4")
    h100 = replace(t4, name="h100-0", labels={GPU_MODEL_LABEL: "H100"})
    unknown = _run([h100], path, profiles, "tiresias-pollux")
    known = _run([t4], path, profiles, "tiresias-pollux")
    assert unknown["gpu_type_fallback_jobs"] == 1
    assert unknown["gpu_type_jobs"] == {"H100": 1}
    assert unknown["avg_jct_s"] == known["avg_jct_s"]  # the default curves are the T4's


def test_a_job_on_two_types_runs_at_the_slower(profiles: Path, tmp_path: Path) -> None:
    model = load_pollux(_trace(tmp_path, "c-0,0,cifar10,8,1024"), profiles_dir=profiles)
    elastic = model.jobs[0].elastic
    assert elastic is not None
    choice = choose(elastic, ["A100", "T4"], [4, 4])
    assert choice.mixed and not choice.fallback
    assert choice.profile.gpu_model == "T4"
    assert choose(elastic, ["A100"], [8]).profile.gpu_model == "A100"
    # 8 GPUs on one node are read by the T4 curves as two nodes of 4
    assert choose(elastic, ["A100", "T4"], [8]).placement == (4, 4)


def test_homogeneous_profiles_are_left_as_they_were(traces_dir: Path, tmp_path: Path) -> None:
    """Pollux's profiles have no per-type curves: no job carries any, nothing is
    counted, and summary.json has no ``gpu_type_*`` figure."""
    folder = traces_dir / "philly-jobs-pollux" / "app_profiles"
    if not folder.is_dir():
        pytest.skip(f"Pollux's application profiles not found at {folder}")
    path = _trace(tmp_path, "c-0,0,cifar10,4,512")
    workload = load_pollux(path, profiles_dir=folder)
    assert workload.jobs[0].elastic is not None and not workload.jobs[0].elastic.by_model
    summary = _run(list(cluster_preset("pollux")), path, folder, "tiresias-pollux")
    assert not any(key.startswith("gpu_type") for key in summary)
    restart = workload.jobs[0].restart_delay
    # it starts at the session a second after it arrives
    assert summary["avg_jct_s"] == pytest.approx(workload.jobs[0].duration + restart + 1, abs=0.5)


def test_an_elastic_job_keeps_its_progress_across_types(profiles: Path) -> None:
    """A change of curves on the same shape is a move (it costs the restart delay);
    the progress made on T4 carries over, and A100 trains faster from there."""
    by_model = read_gpu_profiles(profiles / "cifar10")
    t4, a100 = by_model["T4"], by_model["A100"]
    run = ElasticRun(profile=t4, batch_size=512, delay=30.0)
    assert run.move([4], 0.0)
    run.advance(630.0)
    on_t4 = run.job.position
    assert not run.move([4], 630.0, profile=t4)  # the same curves and shape: no change
    assert run.move([4], 630.0, profile=a100)
    assert run.profile is a100 and run.job.position == on_t4
    run.advance(1260.0)
    gained_a100 = run.job.position.progress - on_t4.progress
    assert gained_a100 > on_t4.progress  # 600 s of training each way


def test_a_job_reports_sias_bootstrapping_points_on_each_type(
    profiles: Path, tmp_path: Path
) -> None:
    workload = load_pollux(_trace(tmp_path, "c-0,0,cifar10,4,512"), profiles_dir=profiles)
    model = workload.jobs[0].elastic
    assert model is not None
    rows = bootstrap_rows(model, ["A100", "T4", "RTX2080Ti", "H100"])
    assert [key[0] for key, _ in rows] == ["A100", "RTX2080Ti", "T4"]  # no H100 curves
    assert all(key[1:3] == (1, 1) for key, _ in rows)
    by_model = read_gpu_profiles(profiles / "cifar10")
    for (name, _, _, batch), _times in rows:
        assert batch <= by_model[name].max_local_batch
    speeds = {key[0]: key[3] / times[0] for key, times in rows}
    assert speeds["A100"] > speeds["T4"]
    assert bootstrap_rows(model, ["T4"]) == ()  # one type: nothing to choose


def test_a_log_keeps_each_types_steps_apart(profiles: Path) -> None:
    """A job's log keys its steps by GPU type too: its own fit reads its type's."""
    by_model = read_gpu_profiles(profiles / "cifar10")
    log = StepLog().record(by_model["T4"], (4,), 64).record(by_model["A100"], (4,), 64)
    assert [key[0] for key, _ in log.rows] == ["T4", "A100"]
    t4, a100 = log.observations("T4"), log.observations("A100")
    assert t4 is not None and a100 is not None
    assert float(a100.sync_time[0]) < float(t4.sync_time[0])
    assert log.observations("V100") is None


def test_on_sia_the_policy_sends_a_job_to_the_type_it_gains_most_on(
    profiles: Path, tmp_path: Path
) -> None:
    """One A100 node and one T4 node: the lone cifar10 job is reported on both types
    before it runs, and goes to A100 under the goodput policy."""
    path = _trace(tmp_path, "c-0,0,cifar10,4,512")
    summary = _run([_node("T4"), _node("A100")], path, profiles, "phalanx-default")
    assert summary["finished"] == 1
    assert summary["gpu_type_jobs"] == {"A100": 1}
    assert summary["gpu_type_mixed_jobs"] == 0


def test_sias_profiles_train_with_sias_calibration_and_restart_times(
    profiles: Path, tmp_path: Path
) -> None:
    """cifar10 trains 1.8x slower than its curves, bert 1.2x (Sia's SLOWDOWNS), and
    their starts cost 50 s and 120 s (Sia's rescale times)."""
    header, *rows = (profiles / "cifar10" / "placements-aws.csv").read_text().splitlines()
    columns = header.split(",")
    first = dict(zip(columns, rows[0].split(","), strict=True))
    t4 = read_gpu_profiles(profiles / "cifar10")["T4"]
    local, step, _sync = t4.placements[int(first["placement"])]
    at = list(local).index(float(first["local_bsz"]))
    assert step[at] == pytest.approx(1.8 * float(first["step_time"]))
    workload = load_pollux(
        _trace(tmp_path, "c-0,0,cifar10,4,512", "b-0,0,bert,1,12"), profiles_dir=profiles
    )
    restarts = {job.job.name: job.restart_delay for job in workload.jobs}
    assert restarts == {"c-0": 50.0, "b-0": 120.0}
    costs = {
        job.job.name: role.elastic.cost
        for job in workload.jobs
        for role in job.job.roles
        if role.elastic is not None
    }
    assert costs == restarts
