"""TaskLaunch and GpuShareHint: what they accept, what they refuse, what they produce."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.executors.launch import (
    MPS_MEMORY_LIMIT,
    MPS_THREAD_PERCENTAGE,
    GangMember,
    GpuShareHint,
    ServiceClass,
    TaskLaunch,
)


def make_launch(**overrides: Any) -> TaskLaunch:
    fields: dict[str, Any] = {
        "job": "bert",
        "task": "bert-worker-0",
        "role": "worker",
        "index": 0,
        "node": "n0",
        "command": ("python", "train.py"),
    }
    fields.update(overrides)
    return TaskLaunch(**fields)


def test_an_argv_command_runs_as_given() -> None:
    assert make_launch().argv() == ("python", "train.py")


def test_a_string_command_runs_through_the_shell() -> None:
    assert make_launch(command="echo $RANK").argv() == ("/bin/sh", "-c", "echo $RANK")


def test_tasks_are_online_unless_they_say_otherwise() -> None:
    assert make_launch().workload is ServiceClass.ONLINE
    assert make_launch(workload=ServiceClass.OFFLINE).workload == "offline"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"job": "../etc"}, "job"),
        ({"task": ".."}, "task"),
        ({"task": ""}, "task"),
        ({"index": -1}, "index"),
        ({"command": ()}, "command"),
        ({"command": "   "}, "command"),
        ({"job_roles": ("master",)}, "job_roles"),
        ({"memory_bytes": 0}, "memory_bytes"),
        ({"cpu_millicores": -5}, "cpu_millicores"),
        ({"address": "not an address"}, "address"),
        ({"address": ""}, "address"),
        ({"nics": ("mlx5_0,mlx5_1",)}, "nics"),
        ({"nics": ("",)}, "nics"),
        ({"nics": (" mlx5_0",)}, "nics"),
        ({"nics": ("^mlx5_0",)}, "nics"),
        ({"nics": ("mlx5_0", "mlx5_0")}, "nics"),
        # the gang places this very task elsewhere than the launch does
        ({"gang": (GangMember(role="worker", index=0, node="n1"),)}, "gang"),
        (
            {"address": "10.0.0.1", "gang": (GangMember(role="worker", index=0, node="n0"),)},
            "gang",
        ),
    ],
)
def test_bad_launches_are_refused_naming_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as error:
        make_launch(**overrides)
    assert error.value.field == field
    assert "fix:" in str(error.value)


def test_gpu_share_hint_sets_the_mps_client_limits_per_visible_device() -> None:
    hint = GpuShareHint(memory_limit=4 * 2**30, thread_percentage=25)
    assert hint.env(2) == {MPS_THREAD_PERCENTAGE: "25", MPS_MEMORY_LIMIT: "0=4096M,1=4096M"}


def test_gpu_share_hint_sets_only_what_it_has() -> None:
    assert GpuShareHint(thread_percentage=50).env(1) == {MPS_THREAD_PERCENTAGE: "50"}
    assert GpuShareHint(memory_limit=2**30).env(0) == {}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"thread_percentage": 0}, "gpuShare.threadPercentage"),
        ({"thread_percentage": 101}, "gpuShare.threadPercentage"),
        ({"memory_limit": 1000}, "gpuShare.memoryLimit"),
    ],
)
def test_bad_gpu_share_hints_are_refused(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(InvalidInput) as error:
        GpuShareHint(**kwargs)
    assert error.value.field == field


def test_a_launch_carries_its_address_nics_and_gang() -> None:
    gang = (
        GangMember(role="worker", index=0, node="n0", address="10.0.0.1"),
        GangMember(role="worker", index=1, node="n1", address="fd00::2"),
        GangMember(role="worker", index=2, node="n2"),  # no declared address
    )
    launch = make_launch(address="10.0.0.1", nics=("mlx5_0", "mlx5_1"), gang=gang)
    assert (launch.address, launch.nics, launch.gang) == ("10.0.0.1", ("mlx5_0", "mlx5_1"), gang)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"index": -1}, "gang.index"),
        ({"address": "10.0.0.1/24"}, "gang.address"),
        ({"address": "-bad-.lab"}, "gang.address"),
    ],
)
def test_bad_gang_members_are_refused_naming_the_field(fields: dict[str, Any], field: str) -> None:
    values: dict[str, Any] = {"role": "worker", "index": 0, "node": "n0", **fields}
    with pytest.raises(InvalidInput) as error:
        GangMember(**values)
    assert error.value.field == field
    assert "fix:" in str(error.value)
