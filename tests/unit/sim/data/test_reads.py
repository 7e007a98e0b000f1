"""Tasks reading datasets on the simulated cluster: a run progresses once its gang has
its data, each node fills for its own tasks, one fill serves every task of a node, and
what the caches hold and what it cost are told."""

from __future__ import annotations

from phalanx.data.cache import CacheLimits
from phalanx.domain.job import Job, Role
from phalanx.domain.resources import Resources
from phalanx.engine.decisions import Bind
from phalanx.sim.cluster import SimCluster
from phalanx.sim.data import CacheModel, DataPlane
from phalanx.sim.workload import WorkloadJob

GB = 10**9
#: 1 GB/s per node, 1 TB caches: a 100 GB dataset takes 100 s to read cold.
MODEL = CacheModel(limits=CacheLimits(quota=1000 * GB), bandwidth=1 * GB)


def _job(
    name: str, *, replicas: int = 1, datasets: tuple[str, ...] = ("d",), delay: float = 0.0
) -> WorkloadJob:
    role = Role(
        name="w",
        replicas=replicas,
        resources=Resources.of({"gpu": 1}),
        datasets=tuple((d, d) for d in datasets),
    )
    job = Job(name=name, queue="q", roles=(role,))
    return WorkloadJob(job=job, duration=50.0, restart_delay=delay)


def _bind(job: str, index: int = 0, node: str = "n0") -> Bind:
    return Bind(job=job, task=f"{job}-w-{index}", role="w", index=index, node=node)


def _cluster(*jobs: WorkloadJob) -> tuple[SimCluster, DataPlane]:
    plane = DataPlane(["n0", "n1"], {"d": 100 * GB, "e": 50 * GB, "big": 900 * GB}, MODEL)
    return SimCluster({job.name: job for job in jobs}, data=plane), plane


def _ends(cluster: SimCluster, until: float) -> list[tuple[float, str]]:
    """When each task exits, playing the cluster up to ``until``."""
    found = []
    while (due := cluster.next_event_time()) is not None and due <= until:
        found += [(e.time, e.task) for e in cluster.poll(now=due) if e.kind.value == "exited"]
    return found


def test_a_cold_task_waits_size_over_bandwidth_before_it_progresses_a_warm_one_not() -> None:
    cluster, plane = _cluster(_job("cold", delay=30.0), _job("warm"))
    cluster.start([_bind("cold")], now=0.0)
    cluster.poll(now=0.0)
    assert cluster.next_event_time() == 100.0  # the fill lands
    cluster.poll(now=100.0)
    assert cluster.next_event_time() == 180.0  # 100 s reading, its 30 s restart, 50 s work
    assert plane.changes() == [("n0", frozenset({"d"}))]
    cluster.start([_bind("warm")], now=110.0)
    cluster.poll(now=110.0)
    assert cluster.next_event_time() == 160.0  # held whole on n0: no wait
    assert plane.stats.summary()["data_delay_avg_s"] == 50.0  # (100 + 0) / 2
    assert plane.stats.summary()["data_hit_rate"] == 0.5


def test_tasks_on_one_node_share_one_fill_and_each_dataset_counts_once() -> None:
    cluster, plane = _cluster(_job("a"), _job("b", datasets=("d", "e")))
    cluster.start([_bind("a")], now=0.0)
    cluster.start([_bind("b")], now=40.0)  # d is under way (until 100), then e: 150
    # a: d at 100, then 50 s; b: e at 150, then 50 s
    assert _ends(cluster, 1000.0) == [(150.0, "a-w-0"), (200.0, "b-w-0")]
    stats = plane.stats.summary()
    assert stats["data_cold_bytes"] == 150 * GB  # d once, e once
    assert stats["data_hit_rate"] == 0.0
    assert stats["data_delay_p50_s"] == 105.0  # 100 and 110 s


def test_a_gang_on_two_nodes_fills_each_and_progresses_when_both_have_the_data() -> None:
    cluster, plane = _cluster(_job("g", replicas=2))
    cluster.start([_bind("g", 0, node="n0")], now=0.0)
    cluster.start([_bind("g", 1, node="n1")], now=30.0)  # the gang is whole at 30
    # n0's copy lands at 100, n1's at 130: 50 s of work from then
    assert _ends(cluster, 1000.0) == [(180.0, "g-w-0"), (180.0, "g-w-1")]
    assert plane.stats.summary()["data_cold_bytes"] == 200 * GB
    assert plane.changes() == [("n0", frozenset({"d"})), ("n1", frozenset({"d"}))]


def test_what_a_running_task_reads_is_not_evicted_and_is_once_it_ended() -> None:
    # d (100 GB) and big (900 GB) fill the 1 TB cache past its 95% watermark
    big = ("big",)
    cluster, plane = _cluster(
        _job("a"), _job("b", datasets=big), _job("c"), _job("e", datasets=big)
    )
    cluster.start([_bind("a")], now=0.0)
    cluster.poll(now=100.0)  # d landed; a reads it until 150
    cluster.start([_bind("b")], now=120.0)
    _ends(cluster, 2000.0)
    assert plane.cache("n0").held() == frozenset({"d", "big"})  # d was pinned by a
    cluster.start([_bind("c", node="n1")], now=2000.0)
    assert _ends(cluster, 2200.0) == [(2150.0, "c-w-0")]
    cluster.start([_bind("e", node="n1")], now=2200.0)  # c has ended: nothing pins d
    _ends(cluster, 5000.0)
    assert plane.cache("n1").held() == frozenset({"big"})
