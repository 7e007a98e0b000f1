"""A LocalExecutor running real tasks: environment, logs, exit codes, idempotent start."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Hostfile
from phalanx.executors.base import LogStream, TaskEventKind
from phalanx.executors.cgroups import Isolation
from phalanx.executors.launch import GangMember, GpuShareHint
from phalanx.executors.process import EXIT_FILE
from tests.integration.executors.harness import DUMP_ENV, Harness, is_gone, wait_for


def test_a_distributed_job_sees_its_rendezvous(harness: Harness) -> None:
    roles = ("master", "worker")
    master = harness.launch(
        "m0", command=DUMP_ENV, role="master", index=0, gpus=(0, 1), job_roles=roles
    )
    w1 = harness.launch("w1", command=DUMP_ENV, role="worker", index=1, node="n1", job_roles=roles)
    w0 = harness.launch(
        "w0", command=DUMP_ENV, role="worker", index=0, node="n1", gpus=(3,), job_roles=roles
    )
    harness.start(w1, master, w0)  # bind order does not decide ranks
    envs = {launch.task: harness.env_of(launch) for launch in (master, w0, w1)}
    assert {t: e["RANK"] for t, e in envs.items()} == {"m0": "0", "w0": "1", "w1": "2"}
    assert {t: e["LOCAL_RANK"] for t, e in envs.items()} == {"m0": "0", "w0": "0", "w1": "1"}
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"3"}
    assert {e["MASTER_ADDR"] for e in envs.values()} == {"127.0.0.1"}
    master_port = envs["m0"]["MASTER_PORT"]
    assert master_port.isdigit() and {e["MASTER_PORT"] for e in envs.values()} == {master_port}
    assert envs["m0"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert envs["w0"]["CUDA_VISIBLE_DEVICES"] == "3"
    assert envs["w1"]["CUDA_VISIBLE_DEVICES"] == ""
    worker_hosts = envs["m0"]["PHALANX_HOSTS_WORKER"].split(",")
    assert len(worker_hosts) == 2 and all(h.startswith("127.0.0.1:") for h in worker_hosts)
    assert master_port not in {h.split(":")[1] for h in worker_hosts}
    assert "TF_CONFIG" not in envs["m0"]
    assert "PHALANX_HOSTFILE" not in envs["m0"]  # no hostfile asked for
    assert (envs["w1"]["PHALANX_JOB"], envs["w1"]["PHALANX_TASK"], envs["w1"]["PHALANX_NODE"]) == (
        "job",
        "w1",
        "n1",
    )


def test_a_parameter_server_job_gets_tf_config(harness: Harness) -> None:
    roles = ("ps", "worker")
    ps = harness.launch("ps0", command=DUMP_ENV, role="ps", index=0, job_roles=roles)
    worker = harness.launch("w0", command=DUMP_ENV, role="worker", index=0, job_roles=roles)
    harness.start(ps, worker)
    env = harness.env_of(worker)
    config = json.loads(env["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 0}
    assert config["cluster"]["ps"] == env["PHALANX_HOSTS_PS"].split(",")
    assert config["cluster"]["worker"] == env["PHALANX_HOSTS_WORKER"].split(",")


def test_user_env_is_kept_but_cannot_override_the_assignment_or_see_server_secrets(
    harness: Harness,
) -> None:
    launch = harness.launch(
        command=DUMP_ENV,
        env={"LR": "0.1", "RANK": "99", "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
        gpus=(2,),
        gpu_share=GpuShareHint(thread_percentage=30),
    )
    harness.start(launch)
    env = harness.env_of(launch)
    assert (env["LR"], env["RANK"], env["CUDA_VISIBLE_DEVICES"]) == ("0.1", "0", "2")
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert env["PATH"] == "/usr/bin:/bin"
    assert "SECRET_TOKEN" not in env
    assert env["PHALANX_WORKDIR"] == str(harness.workdir(launch))


def test_stdout_and_stderr_are_appended_to_log_files(harness: Harness) -> None:
    launch = harness.launch(command="echo out-$PHALANX_INDEX; echo err >&2")
    harness.start(launch)
    harness.wait_event("t0")
    harness.start(launch)  # a second run of the same task (a retry) appends
    wait_for(
        lambda: (
            harness.poll() is not None
            and sum(e.kind is TaskEventKind.EXITED for e in harness.events) == 2
        ),
        "the second run to end",
    )
    workdir = harness.workdir(launch)
    header = "--- attempt 2 (retry after: exit code 0) ---\n"  # the second run's, in both
    assert (workdir / "stdout.log").read_text() == f"out-0\n{header}out-0\n"
    assert (workdir / "stderr.log").read_text() == f"err\n{header}err\n"
    # the same streams through the executor's log seam, which the API reads
    stdout = harness.executor.logs("job", "t0", LogStream.STDOUT)
    assert (stdout.size(), stdout.read(6, 100)) == (12 + len(header), f"{header}out-0\n".encode())
    stderr = harness.executor.logs("job", "t0", LogStream.STDERR)
    assert stderr.read(0, 100) == f"err\n{header}err\n".encode()
    never_ran = harness.executor.logs("job", "t9", LogStream.STDOUT)
    assert (never_ran.size(), never_ran.read(0, 10)) == (0, b"")


def test_the_log_seam_refuses_names_that_could_leave_the_data_dir(harness: Harness) -> None:
    with pytest.raises(InvalidInput) as error:
        harness.executor.logs("..", "t0", LogStream.STDOUT)
    assert error.value.field == "job"
    with pytest.raises(InvalidInput) as error:
        harness.executor.logs("job", "a/b", LogStream.STDERR)
    assert error.value.field == "task"


def test_the_bound_nics_reach_the_task_as_nccl_ib_hca_and_phalanx_nics(harness: Harness) -> None:
    launch = harness.launch(
        command=DUMP_ENV, gpus=(0, 1), nics=("mlx5_0", "mlx5_1"), env={"NCCL_IB_HCA": "mlx5"}
    )
    harness.start(launch)
    env = harness.env_of(launch)
    assert env["PHALANX_NICS"] == "mlx5_0,mlx5_1"
    assert env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"  # the scheduler's choice wins


def test_declared_addresses_of_other_machines_are_not_used_by_the_local_executor(
    harness: Harness,
) -> None:
    roles = ("master", "worker")
    gang = (
        GangMember(role="master", index=0, node="n0", address="10.255.0.1"),
        GangMember(role="worker", index=0, node="n1", address="10.255.0.2"),
    )
    master = harness.launch(
        "m0", command=DUMP_ENV, role="master", address="10.255.0.1", gang=gang, job_roles=roles
    )
    worker = harness.launch(
        "w0", command=DUMP_ENV, node="n1", address="10.255.0.2", gang=gang, job_roles=roles
    )
    harness.start(master, worker)
    envs = [harness.env_of(master), harness.env_of(worker)]
    # Every task runs on this host, so every node's address is the executor's host: the
    # ports were opened there, not on 10.255.0.x (which is not this machine).
    assert harness.executor.address_of("n1", "10.255.0.2") == "127.0.0.1"
    assert {env["MASTER_ADDR"] for env in envs} == {"127.0.0.1"}
    assert envs[0]["PHALANX_HOSTS_WORKER"].startswith("127.0.0.1:")
    assert envs[1]["PHALANX_HOSTS_MASTER"].startswith("127.0.0.1:")


@pytest.mark.parametrize("code", [0, 3])
def test_the_exit_code_is_reported(harness: Harness, code: int) -> None:
    harness.start(harness.launch(command=("sh", "-c", f"exit {code}")))
    event = harness.wait_event("t0")
    assert (event.exit_code, event.stopped, event.job, event.node) == (code, False, "job", "n0")
    started = harness.events[0]
    assert started.kind is TaskEventKind.STARTED and started.task == "t0"


def test_the_wrapper_records_the_code_and_its_pid(harness: Harness) -> None:
    launch = harness.launch(command=("sh", "-c", "exit 4"))
    harness.start(launch)
    pid = harness.pid_of(launch)
    harness.wait_event("t0")
    assert (harness.workdir(launch) / EXIT_FILE).read_text() == f"4 {pid}\n"


def test_a_task_killed_by_a_signal_reports_128_plus_the_signal(harness: Harness) -> None:
    harness.start(harness.launch(command="kill -SEGV $$"))
    assert harness.wait_event("t0").exit_code == 128 + signal.SIGSEGV


def test_a_group_killed_from_outside_reports_sigkill(harness: Harness) -> None:
    launch = harness.launch(command="touch ready; exec sleep 60")
    harness.start(launch)
    harness.wait_file(launch, "ready")
    os.killpg(harness.pid_of(launch), signal.SIGKILL)
    event = harness.wait_event("t0")
    assert (event.exit_code, event.stopped) == (128 + signal.SIGKILL, False)


def test_start_is_idempotent(harness: Harness) -> None:
    launch = harness.launch(command="touch ready; exec sleep 60")
    harness.start(launch, launch)
    harness.start(launch)
    harness.wait_file(launch, "ready")
    harness.poll()
    assert [e.kind for e in harness.events] == [TaskEventKind.STARTED]
    assert len(harness.executor.running()) == 1 and len(harness.executor.records()) == 1


def test_events_after_now_wait_for_a_later_poll(harness: Harness) -> None:
    harness.start(harness.launch(command="touch ready; exec sleep 60"))
    assert harness.executor.poll(now=harness.now - 1) == []
    assert [e.kind for e in harness.executor.poll(now=harness.now)] == [TaskEventKind.STARTED]
    assert harness.executor.poll(now=harness.now) == []  # each event is reported once


def test_an_exit_is_never_reported_before_its_start(harness: Harness) -> None:
    launch = harness.launch(command=("true",))
    harness.start(launch)
    pid = harness.pid_of(launch)
    wait_for(lambda: is_gone(pid), "the task to end")
    events = harness.executor.poll(now=harness.now - 1)  # a clock that went backwards

    def ended() -> bool:
        events.extend(harness.executor.poll(now=harness.now))
        return any(e.kind is TaskEventKind.EXITED for e in events)

    wait_for(ended, "the launcher to report the end")
    assert [e.kind for e in events] == [TaskEventKind.STARTED, TaskEventKind.EXITED]
    assert events[0].time == events[1].time == harness.now


def test_memory_limit_caps_the_address_space_of_cpu_tasks_only(tmp_path: Path) -> None:
    harness = Harness(tmp_path / "data", isolation=Isolation.rlimit("test"))
    cpu = harness.launch("cpu", command="ulimit -v > limit", memory_bytes=512 * 2**20)
    gpu = harness.launch("gpu", command="ulimit -v > limit", memory_bytes=512 * 2**20, gpus=(0,))
    harness.start(cpu, gpu)
    harness.wait_event("cpu")
    harness.wait_event("gpu")
    assert harness.wait_file(cpu, "limit").strip() == str(512 * 1024)
    assert harness.wait_file(gpu, "limit").strip() == "unlimited"


def test_a_launcher_with_a_hostfile_gets_its_workers_hosts(harness: Harness) -> None:
    roles = ("launcher", "worker")
    gang = tuple(
        GangMember(role=role, index=index, node=node)
        for role, index, node in (("launcher", 0, "n0"), ("worker", 0, "n1"), ("worker", 1, "n2"))
    )
    workers = [
        harness.launch(
            f"w{i}", command=("true",), role="worker", index=i, node=f"n{i + 1}", job_roles=roles
        )
        for i in range(2)
    ]
    launcher = harness.launch(
        "l0",
        command=DUMP_ENV,
        role="launcher",
        job_roles=roles,
        gang=gang,
        hostfile=Hostfile(role="worker", slots=4),
    )
    harness.start(*workers, launcher)
    env = harness.env_of(launcher)
    path = harness.workdir(launcher) / "hostfile"
    assert env["PHALANX_HOSTFILE"] == str(path)
    assert path.read_text() == "127.0.0.1 slots=4\n127.0.0.1 slots=4\n"


def test_a_hostfile_of_a_role_without_tasks_fails_the_start(harness: Harness) -> None:
    launcher = harness.launch(
        "l0", command=("true",), role="launcher", hostfile=Hostfile(role="worker")
    )
    harness.start(launcher)
    event = harness.wait_event("l0", TaskEventKind.FAILED_TO_START)
    assert "no placed task of role 'worker'" in event.message
