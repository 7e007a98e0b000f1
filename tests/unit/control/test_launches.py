"""launch_of: what the controller hands the executor for one bind of a job."""

from __future__ import annotations

from phalanx.control.controllers.launches import launch_of
from phalanx.domain.job import Job, Role
from phalanx.engine.decisions import Bind
from phalanx.executors.launch import GangMember
from tests.builders import make_job, res


def ddp() -> Job:
    """Two workers of two GPUs each, running train.py."""
    worker = Role(
        name="worker", replicas=2, resources=res(4, 16, 2), command=("python", "train.py")
    )
    return make_job("ddp", roles=[worker])


def bind(index: int, node: str, nics: tuple[str, ...] = ()) -> Bind:
    return Bind(
        job="ddp",
        task=f"ddp-worker-{index}",
        role="worker",
        index=index,
        node=node,
        gpus=(0, 1),
        nics=nics,
    )


def test_the_bound_nics_and_the_nodes_addresses_reach_the_launch() -> None:
    job = ddp()
    gang = (
        GangMember(role="worker", index=0, node="a", address="10.0.0.1"),
        GangMember(role="worker", index=1, node="b", address="10.0.0.2"),
    )
    launch = launch_of(job, bind(1, "b", nics=("mlx5_0", "mlx5_1")), gang, address="10.0.0.2")
    assert launch.nics == ("mlx5_0", "mlx5_1")
    assert launch.address == "10.0.0.2"
    assert launch.gang == gang
    assert (launch.task, launch.node, launch.gpus) == ("ddp-worker-1", "b", (0, 1))
    assert launch.command == ("python", "train.py")


def test_a_bind_without_nics_or_a_declared_address_launches_without_them() -> None:
    launch = launch_of(ddp(), bind(0, "a"))
    assert (launch.nics, launch.address, launch.gang) == ((), None, ())
