"""The pure helpers of the process layer: codes, exit files, environment, limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phalanx.executors.launch import GpuShareHint, TaskLaunch
from phalanx.executors.process import (
    DEFAULT_PATH,
    EXIT_FILE,
    NCCL_IB_HCA,
    PHALANX_NICS,
    address_space_kib,
    read_exit_code,
    shell_code,
    task_environment,
    task_workdir,
)


def launch(**fields: Any) -> TaskLaunch:
    values: dict[str, Any] = {
        "job": "j",
        "task": "t",
        "role": "w",
        "index": 0,
        "node": "n0",
        "command": ("true",),
    }
    values.update(fields)
    return TaskLaunch(**values)


def test_shell_codes_are_128_plus_the_signal() -> None:
    assert [shell_code(0), shell_code(3), shell_code(-9), shell_code(-15)] == [0, 3, 137, 143]


def test_task_workdir_is_per_job_and_task() -> None:
    assert task_workdir(Path("/d"), "j", "t") == Path("/d/tasks/j/t")


def test_the_exit_code_is_read_only_for_its_own_wrapper(tmp_path: Path) -> None:
    assert read_exit_code(tmp_path, 10) is None  # no file yet
    (tmp_path / EXIT_FILE).write_text("3 10\n")
    assert read_exit_code(tmp_path, 10) == 3
    assert read_exit_code(tmp_path, 11) is None  # another run's file
    (tmp_path / EXIT_FILE).write_text("garbage")
    assert read_exit_code(tmp_path, 10) is None
    assert read_exit_code(tmp_path / "missing", 10) is None


def test_environment_layers_later_ones_winning(tmp_path: Path) -> None:
    env = task_environment(
        launch(
            env={"LANG": "C", "RANK": "7", "A": "1"},
            gpus=(0,),
            gpu_share=GpuShareHint(thread_percentage=40),
        ),
        {"RANK": "0"},
        workdir=tmp_path,
        inherited={"HOME": "/root", "LANG": "en_US.UTF-8", "DATABASE_URL": "postgres://secret"},
    )
    assert env["HOME"] == "/root"  # allow-listed server variable
    assert "DATABASE_URL" not in env  # any other server variable stays out
    assert (env["LANG"], env["A"], env["RANK"]) == ("C", "1", "0")
    assert env["PATH"] == DEFAULT_PATH  # a task always has a PATH
    assert (env["PHALANX_TASK"], env["PHALANX_NODE"], env["PHALANX_WORKDIR"]) == (
        "t",
        "n0",
        str(tmp_path),
    )
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "40"


def test_the_bound_nics_reach_the_task_and_win_over_the_users_choice(tmp_path: Path) -> None:
    env = task_environment(
        launch(nics=("mlx5_0", "mlx5_1"), env={NCCL_IB_HCA: "mlx5", PHALANX_NICS: "fake"}),
        {},
        workdir=tmp_path,
        inherited={},
    )
    assert env[PHALANX_NICS] == "mlx5_0,mlx5_1"
    # '=': exact device names for NCCL, so mlx5_1 does not also select mlx5_10 and mlx5_11
    assert env[NCCL_IB_HCA] == "=mlx5_0,mlx5_1"


def test_without_nics_the_users_nccl_choice_stays_and_the_list_is_empty(tmp_path: Path) -> None:
    env = task_environment(
        launch(env={NCCL_IB_HCA: "mlx5_3", PHALANX_NICS: "fake"}),
        {},
        workdir=tmp_path,
        inherited={NCCL_IB_HCA: "from-the-server"},
    )
    assert env[NCCL_IB_HCA] == "mlx5_3"  # the user's own, since phalanx bound none
    assert env[PHALANX_NICS] == ""  # empty, not the user's: phalanx bound none
    bare = task_environment(launch(), {}, workdir=tmp_path, inherited={NCCL_IB_HCA: "x"})
    assert NCCL_IB_HCA not in bare  # never inherited from the server


def test_address_space_limit_only_for_cpu_tasks_with_a_memory_limit() -> None:
    assert address_space_kib(launch()) is None
    assert address_space_kib(launch(memory_bytes=2**30)) == 2**20
    assert address_space_kib(launch(memory_bytes=2**30, gpus=(0,))) is None
