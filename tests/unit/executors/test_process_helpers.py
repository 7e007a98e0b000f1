"""The pure helpers of the process layer: codes, exit files, environment, limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from phalanx.executors.launch import GpuShareHint, TaskLaunch
from phalanx.executors.process import (
    EXIT_FILE,
    HASH_MARK,
    NAME_MAX,
    address_space_kib,
    dir_name,
    read_exit_code,
    shell_code,
)
from phalanx.executors.taskdirs import TaskDirs
from phalanx.executors.taskenv import DEFAULT_PATH, NCCL_IB_HCA, PHALANX_NICS, task_environment


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


def task_workdir(data_dir: Path, job: str, task: str) -> Path:
    return TaskDirs(tasks_root=data_dir / "tasks", records_root=data_dir / "r").workdir(job, task)


def test_task_workdir_is_per_job_and_task() -> None:
    assert task_workdir(Path("/d"), "j", "t") == Path("/d/tasks/j/t")


def test_the_record_of_a_task_is_outside_its_workdir() -> None:
    dirs = TaskDirs(tasks_root=Path("/t"), records_root=Path("/d/records"))
    assert dirs.record("j", "t") == Path("/d/records/j/t/process.json")


def test_names_that_fit_are_directory_names_as_they_are() -> None:
    # Every name the spec accepts up to 255 bytes: data dirs written before stay valid.
    for name in ("j", "bert-pretrain-worker-12", "a.b-c", "x" * NAME_MAX, "é" * 127):
        assert dir_name(name) == name


def test_a_long_name_is_shortened_readably_and_stably() -> None:
    job = "long-" + "n" * 240 + "-name"  # 250 characters, as long as a job name gets
    task = f"{job}-worker-1"
    assert task_workdir(Path("/d"), job, task) == Path("/d/tasks", job, dir_name(task))
    short = dir_name(task)
    assert len(short.encode()) == NAME_MAX
    assert short.startswith("long-nnn") and "..nnn" in short
    assert short.endswith("-name-worker-1~c7f38c30a44b8687")  # the same in every release
    assert dir_name(task) == short


def test_a_name_holding_the_mark_is_never_taken_for_a_shortened_one() -> None:
    shortened = dir_name("y" * 300)
    assert dir_name(shortened) != shortened  # a name that looks shortened is hashed too
    assert dir_name("a~b").startswith("a~b~") and dir_name("a~b") != "a~b"


def test_names_differing_only_where_they_are_cut_get_distinct_directories() -> None:
    names = [f"{'x' * 200}{middle}{'y' * 100}" for middle in ("a", "b", "ab", "")]
    names += [f"{'é' * 200}{tail}" for tail in ("-worker-0", "-worker-1")]
    shortened = [dir_name(name) for name in names]
    assert len(set(shortened)) == len(names)
    for directory in shortened:
        assert len(directory.encode()) <= NAME_MAX and HASH_MARK in directory
        directory.encode().decode()  # cut between characters, never inside one


# Names as a task's path part may be (no "/" or NUL, not "." or ".."); some share a
# long start, so that only their hashes can tell them apart.
_PATH_PART = (
    st.tuples(
        st.sampled_from(["", "p" * 300, "é" * 150]),
        st.text(
            alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="/\x00"),
            min_size=1,
            max_size=300,
        ),
    )
    .map("".join)
    .filter(lambda name: name not in {".", ".."})
)


@given(st.lists(_PATH_PART, min_size=2, max_size=8, unique=True))
def test_distinct_names_never_share_a_directory_and_every_one_fits(names: list[str]) -> None:
    directories = [dir_name(name) for name in names]
    assert len(set(directories)) == len(names)
    assert all(0 < len(d.encode()) <= NAME_MAX and "/" not in d for d in directories)


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
