"""The container runtime's command lines, settings and env files, without running one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.executors.containers import (
    RUNTIME_FAILED,
    ContainerRuntime,
    ContainerTask,
    PresentImages,
    RuntimeKind,
    Ulimit,
    cdi_problem,
    container_env,
    container_name,
    detect_runtime,
    node_labels,
    run_argv,
    write_env_file,
)
from phalanx.executors.containers.runtime import _found, _json_items
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.process import Exit

WORKDIR = Path("/srv/tasks/job/job-worker-0")
ENV_FILE = Path("/srv/data/records/job/job-worker-0/container.env")
PODMAN = ContainerRuntime(
    kind=RuntimeKind.PODMAN,
    client="/usr/bin/podman",
    oci_runtime="runc",
    ulimits=(
        Ulimit(name="nofile", soft=20000, hard=20000),
        Ulimit(name="nproc", soft=4096, hard=4096),
    ),
)
DOCKER = ContainerRuntime(kind=RuntimeKind.DOCKER, client="/usr/bin/docker")


def launch(**fields: Any) -> TaskLaunch:
    values: dict[str, Any] = {
        "job": "job", "task": "job-worker-0", "role": "worker", "index": 0, "node": "n0",
        "command": ("python", "train.py"), "image": "registry.example/train:1",
    }  # fmt: skip
    values.update(fields)
    return TaskLaunch(**values)


def argv(runtime: ContainerRuntime = PODMAN, **fields: Any) -> tuple[str, ...]:
    return run_argv(
        runtime, launch(**fields), name="c", scope="abc", workdir=WORKDIR, env_file=ENV_FILE
    )


def flag_values(args: tuple[str, ...], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]


def test_no_value_of_the_environment_is_on_the_command_line() -> None:
    args = argv(env={"WANDB_API_KEY": "secret"})
    assert "secret" not in " ".join(args)
    assert flag_values(args, "--env-file") == [str(ENV_FILE)]
    assert "--env" not in args and "-e" not in args


def test_the_client_runs_under_a_shell_that_removes_the_container_after_it() -> None:
    args = argv()
    assert args[:2] == ("/bin/sh", "-c") and "rm -f" in args[2] and args[3] == "c"


def test_the_image_and_command_come_last() -> None:
    args = argv()
    assert args[-3:] == ("registry.example/train:1", "python", "train.py")
    assert argv(command="echo hi")[-4:] == ("registry.example/train:1", "/bin/sh", "-c", "echo hi")


def test_podman_gets_this_hosts_oci_runtime_ulimits_and_a_replacing_name() -> None:
    args = argv()
    assert args[4:6] == ("/usr/bin/podman", "run") and "--rm" not in args
    assert flag_values(args, "--runtime") == ["runc"]
    assert flag_values(args, "--ulimit") == ["nofile=20000:20000", "nproc=4096:4096"]
    assert flag_values(args, "--name") == ["c"]
    assert "--replace" in args and flag_values(args, "--log-driver") == ["passthrough"]


def test_docker_gets_neither_podman_only_flags_nor_a_runtime_it_was_not_given() -> None:
    args = argv(DOCKER)
    assert (
        "--rm" in args
        and "--replace" not in args
        and "--runtime" not in args
        and "--log-driver" not in args
    )


def test_the_workdir_is_mounted_at_its_own_path_and_the_network_is_the_hosts() -> None:
    args = argv()
    assert flag_values(args, "--volume") == [f"{WORKDIR}:{WORKDIR}"]
    assert flag_values(args, "--workdir") == [str(WORKDIR)]
    assert flag_values(args, "--network") == ["host"]
    assert flag_values(args, "--security-opt") == ["no-new-privileges"]
    assert "--init" in args and flag_values(args, "--pull") == ["never"]


def test_the_roles_mounts_are_mounted_at_their_own_paths_after_the_workdir() -> None:
    args = argv(mounts=("/srv/workspace", str(WORKDIR)))
    assert flag_values(args, "--volume") == [
        f"{WORKDIR}:{WORKDIR}",
        "/srv/workspace:/srv/workspace",
    ]
    with pytest.raises(InvalidInput) as refused:
        argv(mounts=("relative/dir",))
    assert refused.value.field == "mounts"


def test_the_user_is_the_tasks_identity_with_its_groups() -> None:
    alice = TaskIdentity(uid=2001, gid=2002, name="alice", groups=(2003, 2004))
    args = argv(identity=alice)
    assert flag_values(args, "--user") == ["2001:2002"]
    assert flag_values(args, "--group-add") == ["2003", "2004"]


def test_limits_and_gpus_come_from_the_request() -> None:
    args = argv(cpu_millicores=2500, memory_bytes=2**30, gpus=(3, 5))
    assert flag_values(args, "--cpus") == ["2.5"]
    assert flag_values(args, "--memory") == [str(2**30)]
    assert flag_values(args, "--memory-swap") == [str(2**30)]
    assert flag_values(args, "--device") == ["nvidia.com/gpu=3", "nvidia.com/gpu=5"]
    plain = argv()
    assert "--cpus" not in plain and "--memory" not in plain and "--device" not in plain


def test_labels_name_the_job_the_task_and_the_server() -> None:
    assert flag_values(argv(), "--label") == [
        "phalanx.io/data-dir=abc",
        "phalanx.io/job=job",
        "phalanx.io/task=job-worker-0",
    ]


def test_inside_gpus_count_from_zero_and_the_servers_path_stays_out() -> None:
    task = launch(gpus=(3, 5), env={"FOO": "1"})
    env = {"PATH": "/usr/bin", "LANG": "C", "FOO": "1", "CUDA_VISIBLE_DEVICES": "3,5"}
    inside = container_env(task, env, workdir=WORKDIR)
    assert inside == {"FOO": "1", "CUDA_VISIBLE_DEVICES": "0,1", "HOME": str(WORKDIR)}
    mine = launch(env={"PATH": "/opt/bin", "HOME": "/h"})
    assert container_env(mine, {"PATH": "/opt/bin", "HOME": "/h"}, workdir=WORKDIR) == {
        "PATH": "/opt/bin",
        "HOME": "/h",
    }


def test_the_env_file_is_private_and_holds_values_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "d" / "container.env"
    write_env_file(path, {"A": "x y", "B": " lead", "C": "=eq", "D": ""})
    assert path.read_text() == "A=x y\nB= lead\nC==eq\nD=\n"
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [("A", "two\nlines", "env.A"), ("#A", "x", "env.#A"), ("A B", "x", "env.A B")],
)
def test_what_an_env_file_cannot_carry_is_refused_naming_the_variable(
    tmp_path: Path, name: str, value: str, field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        write_env_file(tmp_path / "e", {name: value})
    assert refused.value.field == field
    assert not (tmp_path / "e").exists()


def test_container_names_are_valid_stable_and_distinct() -> None:
    name = container_name("0123456789abcdef", "my job/1", "t:0")
    assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*", name)
    assert name == container_name("0123456789abcdef", "my job/1", "t:0")
    assert name != container_name("0123456789abcdef", "my job-1", "t:0")
    assert len(container_name("s", "j" * 300, "t" * 300)) < 160


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    client = tmp_path / "podman"
    client.write_text("#!/bin/sh\n")
    client.chmod(0o755)
    env = {
        "PATH": str(tmp_path),
        "PHALANX_CONTAINER_OCI_RUNTIME": "",
        "PHALANX_CONTAINER_ULIMITS": "nofile=1024:2048, nproc=10:10",
        "PHALANX_CONTAINER_PULL": "missing",
        "PHALANX_CONTAINER_INIT": "0",
        "SECRET_TOKEN": "x",
    }
    runtime = detect_runtime(env)
    assert runtime is not None
    assert (runtime.kind, runtime.client, runtime.oci_runtime, runtime.pull) == (
        RuntimeKind.PODMAN,
        str(client),
        "",
        "missing",
    )
    assert [u.flag() for u in runtime.ulimits] == ["nofile=1024:2048", "nproc=10:10"]
    assert not runtime.init and "--init" not in run_argv(
        runtime, launch(), name="c", scope="s", workdir=WORKDIR, env_file=ENV_FILE
    )
    assert "SECRET_TOKEN" not in runtime.environ
    assert node_labels(env) == {"phalanx.io/container-runtime": "podman"}
    assert detect_runtime({**env, "PHALANX_CONTAINER_RUNTIME": "none"}) is None
    assert node_labels({**env, "PHALANX_CONTAINER_RUNTIME": "none"}) == {}
    assert detect_runtime({"PATH": str(tmp_path / "empty")}) is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PHALANX_CONTAINER_ULIMITS", "nofile=10"),
        ("PHALANX_CONTAINER_ULIMITS", "nofile=20:10"),
        ("PHALANX_CONTAINER_PULL", "always"),
        ("PHALANX_CONTAINER_INIT", "yes"),
        ("PHALANX_CONTAINER_RUNTIME", "/no/such/client"),
    ],
)
def test_a_wrong_setting_is_refused_naming_it(tmp_path: Path, name: str, value: str) -> None:
    client = tmp_path / "podman"
    client.write_text("#!/bin/sh\n")
    client.chmod(0o755)
    with pytest.raises(InvalidInput) as refused:
        detect_runtime({"PATH": str(tmp_path), name: value})
    assert refused.value.field == name


def test_docker_without_a_daemon_is_no_runtime(tmp_path: Path) -> None:
    client = tmp_path / "docker"
    client.write_text("#!/bin/sh\n")
    client.chmod(0o755)
    env = {"PATH": str(tmp_path), "DOCKER_HOST": f"unix://{tmp_path}/none.sock"}
    assert detect_runtime(env) is None
    assert detect_runtime({**env, "PHALANX_CONTAINER_RUNTIME": "docker"}) is not None


def test_listed_containers_are_read_from_podman_and_docker() -> None:
    podman = '[{"Names": ["a"], "State": "exited", "ExitCode": 3}, {"Names": ["b"], "State": "running", "ExitCode": 0}]'
    assert [_found(i) for i in _json_items(podman)] == [
        _found({"Names": ["a"], "State": "exited", "ExitCode": 3}),
        _found({"Names": ["b"], "State": "running"}),
    ]
    found = [_found(i) for i in _json_items(podman)]
    assert [(f.name, f.running, f.code) for f in found] == [("a", False, 3), ("b", True, None)]
    docker = '{"Names": "c", "State": "exited", "Status": "Exited (2) 3 seconds ago"}\n'
    assert [(f.name, f.running, f.code) for f in map(_found, _json_items(docker))] == [
        ("c", False, 2)
    ]


def test_a_workdir_a_volume_cannot_name_is_refused_naming_the_fix() -> None:
    with pytest.raises(InvalidInput) as refused:
        run_argv(PODMAN, launch(), name="c", scope="s", workdir=Path("/t/a:b"), env_file=ENV_FILE)
    assert refused.value.field == "workdir" and "--tasks-dir" in str(refused.value)


class Inner:
    """A task's process as ``ContainerTask`` sees it, ending with ``code`` when told."""

    def __init__(self) -> None:
        self.pid, self.start_time, self.workdir = 42, 1.0, Path("/srv/data/records/j/t")
        self.sent: list[int] = []
        self.ended: Exit | None = None

    def send(self, signum: int) -> bool:
        self.sent.append(signum)
        return True

    def kill(self) -> bool:
        return self.send(9)

    def poll(self) -> Exit | None:
        return self.ended


def recording_client(tmp_path: Path) -> tuple[ContainerRuntime, Path]:
    """A runtime whose client only appends its arguments to a file (a real program)."""
    calls = tmp_path / "calls"
    client = tmp_path / "client"
    client.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    client.chmod(0o755)
    return ContainerRuntime(kind=RuntimeKind.PODMAN, client=str(client)), calls


def test_a_container_task_kills_pauses_and_resumes_through_the_runtime(tmp_path: Path) -> None:
    runtime, calls = recording_client(tmp_path)
    inner = Inner()
    task = ContainerTask(inner, runtime, "c1")
    assert task.terminate() and inner.sent == []  # SIGTERM straight to the container
    assert task.pause() and task.resume()
    assert task.kill() and inner.sent == [9]
    assert calls.read_text().splitlines() == [
        "kill --signal 15 c1",
        "pause c1",
        "unpause c1",
        "kill --signal 9 c1",
    ]


def test_a_container_task_the_runtime_cannot_signal_is_signalled_through_its_client(
    tmp_path: Path,
) -> None:
    client = tmp_path / "client"
    client.write_text("#!/bin/sh\nexit 125\n")
    client.chmod(0o755)
    inner = Inner()
    task = ContainerTask(inner, ContainerRuntime(kind=RuntimeKind.PODMAN, client=str(client)), "c1")
    assert task.terminate() and inner.sent == [15]
    assert (task.pid, task.start_time, task.workdir) == (42, 1.0, inner.workdir)


@pytest.mark.parametrize(
    ("code", "removed"), [(0, False), (3, False), (125, True), (137, True), (None, True)]
)
def test_a_container_is_removed_when_its_client_may_not_have_seen_its_end(
    tmp_path: Path, code: int | None, removed: bool
) -> None:
    runtime, calls = recording_client(tmp_path)
    inner = Inner()
    task = ContainerTask(inner, runtime, "c1")
    assert task.poll() is None
    inner.ended = Exit(code)
    assert task.poll() == Exit(code)
    asked = "inspect --format {{.State.Status}}\t{{.State.Error}} c1\n" if code == 125 else ""
    assert (calls.read_text() if calls.exists() else "") == (
        f"{asked}rm -f c1\n" if removed else ""
    )


def test_gpus_need_a_cdi_spec_naming_nvidia_gpus(tmp_path: Path) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    (etc / "other.yaml").write_text("cdiVersion: 0.5.0\nkind: vendor.com/fpga\n")
    problem = cdi_problem((str(etc), str(run)))
    assert problem is not None and "nvidia-ctk cdi generate" in problem
    (etc / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n")
    assert cdi_problem((str(etc), str(run))) is None


def test_a_container_the_runtime_could_not_run_has_a_reason(tmp_path: Path) -> None:
    runtime, _ = recording_client(tmp_path)
    task = ContainerTask(Inner(), runtime, "c1")
    assert task.reason(125) == RUNTIME_FAILED
    assert task.reason(1) is None and task.reason(None) is None


def test_an_image_found_is_trusted_for_a_while_and_a_missing_one_asked_again(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls"
    client = tmp_path / "client"
    client.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        'case "$5" in missing*) echo "Error: $5: image not known" >&2; exit 125;; esac\n'
    )
    client.chmod(0o755)
    images = PresentImages(ContainerRuntime(kind=RuntimeKind.PODMAN, client=str(client)), ttl=10)
    assert images.problem("app:1", 100.0) is None
    assert images.problem("app:1", 109.0) is None  # remembered
    assert images.problem("app:1", 111.0) is None  # asked again
    for now in (100.0, 101.0):
        problem = images.problem("missing:1", now)
        assert problem is not None and "missing:1: image not known" in problem
        assert "podman pull missing:1" in problem
    asked = calls.read_text().splitlines()
    assert asked == [
        "image inspect --format {{.Id}} app:1",
        "image inspect --format {{.Id}} app:1",
        "image inspect --format {{.Id}} missing:1",
        "image inspect --format {{.Id}} missing:1",
    ]
