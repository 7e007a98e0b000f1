"""The launcher's request for one task: what the local executor (on this host, or in a
Ray node's agent) asks its launcher to start.

``StartRequests.build`` turns a planned start (its launch, its place in the gang, its
rendezvous variables) into a ``launcher.Start``: the task's environment and files, its
command checked against its ``PATH`` as its own identity, its cgroup planned, and its
record, to be completed by the launcher. A task with an ``image`` becomes a request to
run the container runtime's client instead (``containers``), whose argv holds no value
of the task's environment. Guarantees:

- a task that must not or cannot start gets a sentence a person can act on (returned,
  never raised): no identity where each user has one, a missing command, no runtime,
  an image not on the node, GPUs without a CDI spec;
- any record a previous start of the task left is removed first, so that a record found
  after a launcher's death is this start's;
- request ids grow by one per request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phalanx.executors.cgroups import IsolationKind
from phalanx.executors.containers import (
    ENV_FILE,
    ContainerRuntime,
    PresentImages,
    cdi_problem,
    container_env,
    container_name,
    run_argv,
    write_env_file,
)
from phalanx.executors.failures import NO_CONTAINERS, NO_IDENTITY, missing_command
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.launcher import Start
from phalanx.executors.process import address_space_kib
from phalanx.executors.records import ProcessRecord
from phalanx.executors.rendezvous import Placement, endpoint
from phalanx.executors.taskdirs import TaskDirs
from phalanx.executors.taskenv import task_environment, task_files
from phalanx.executors.taskgroups import TaskGroups
from phalanx.tenantfs import TenantPathRefused, check_mount_source


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    """A task about to start: its launch, its place in the gang, the launcher's request."""

    launch: TaskLaunch
    placement: Placement
    request: Start


class StartRequests:
    """Builds the requests of one executor's tasks (see the module docstring).

    ``environ`` is where the allow-listed inherited variables come from; ``per_user``
    refuses a launch without an identity; ``containers`` is the node's runtime (None:
    image tasks cannot start here); ``scope`` names this executor's groups and
    containers. Not thread-safe."""

    def __init__(
        self,
        *,
        dirs: TaskDirs,
        groups: TaskGroups,
        environ: Mapping[str, str],
        per_user: bool,
        containers: ContainerRuntime | None,
        scope: str,
    ) -> None:
        self._dirs = dirs
        self._groups = groups
        self._environ = environ
        self._per_user = per_user
        self._containers = containers
        self._images = None if containers is None else PresentImages(containers)
        self._scope = scope
        self._next_id = 0

    def build(
        self,
        launch: TaskLaunch,
        placement: Placement,
        injected: Mapping[str, str],
        *,
        now: float,
    ) -> Pending | Refusal:
        """The request for ``launch``, or why it cannot start. Raises what preparing it
        raised (an environment too big, a full disk ...): the caller words it."""
        if launch.model_path is not None and not os.path.isdir(launch.model_path):
            return Refusal(
                message=f"the model version it reads is not at {launch.model_path}; fix: "
                "submit the job again (the server copies the version out before it starts)",
                retriable=False,
            )
        for name, path in launch.datasets.items():
            if not os.path.isdir(path):
                return Refusal(
                    message=f"dataset {name} is not at {path} on this node; fix: submit the "
                    "job again (the server copies it there before the job starts)",
                    retriable=False,
                )
        if launch.image is not None:
            return self._container(launch, launch.image, placement, injected, now)
        workdir = self._dirs.workdir(launch.job, launch.task)
        env = task_environment(launch, injected, workdir=workdir, inherited=self._environ)
        files = task_files(launch, injected)
        missing = missing_command(launch.argv(), env=env, cwd=workdir, identity=launch.identity)
        if self._per_user and launch.identity is None:
            missing = NO_IDENTITY
        if missing is not None:
            return Refusal(message=missing, retriable=False)
        group = self._groups.plan(
            launch.job,
            launch.task,
            cpu_millicores=launch.cpu_millicores,
            memory_bytes=launch.memory_bytes,
        )
        self._dirs.record(launch.job, launch.task).unlink(missing_ok=True)
        record = _unstarted(
            launch,
            workdir,
            placement,
            logs=workdir,
            isolation=IsolationKind.RLIMIT if group is None else self._groups.isolation.kind,
            cgroup="" if group is None else str(group.group.path),
        )
        request = Start(
            id=self._new_id(),
            argv=launch.argv(),
            workdir=workdir,
            env=env,
            identity=launch.identity,
            group=group,
            memory_kib=None if group is not None else address_space_kib(launch),
            record=record,
            files=files,
            attempt=launch.attempt,
        )
        return Pending(launch=launch, placement=placement, request=request)

    def _container(
        self,
        launch: TaskLaunch,
        image: str,
        placement: Placement,
        injected: Mapping[str, str],
        now: float,
    ) -> Pending | Refusal:
        """The request for a task that runs in ``image``: the runtime's client."""
        runtime = self._containers
        if runtime is None:  # the node's runtime went away: another node may have one
            return Refusal(message=NO_CONTAINERS, retriable=True)
        if launch.gpus and (problem := cdi_problem()) is not None:
            return Refusal(message=problem, retriable=True)  # another node may have a spec
        problem = NO_IDENTITY if self._per_user and launch.identity is None else None
        if problem is None and self._images is not None:
            problem = self._images.problem(image, now)
        problem = problem or mount_problem(launch)
        if problem is not None:
            return Refusal(message=problem, retriable=False)
        workdir = self._dirs.workdir(launch.job, launch.task)
        control = self._dirs.record(launch.job, launch.task).parent  # the server's own
        env = task_environment(launch, injected, workdir=workdir, inherited=self._environ)
        write_env_file(control / ENV_FILE, container_env(launch, env, workdir=workdir))
        self._dirs.record(launch.job, launch.task).unlink(missing_ok=True)
        name = container_name(self._scope, launch.job, launch.task)
        argv = run_argv(
            runtime, launch, name=name, scope=self._scope, workdir=workdir,
            env_file=control / ENV_FILE,
        )  # fmt: skip
        request = Start(
            id=self._new_id(),
            argv=argv,
            workdir=workdir,
            env=dict(runtime.environ),
            identity=launch.identity,
            group=None,  # the container has its own, made by the runtime
            memory_kib=None,
            record=_unstarted(
                launch, control, placement, logs=workdir, container=name
            ),  # control: exit_code
            files=task_files(launch, injected),  # the workdir is mounted at its own path
            client=True,
            attempt=launch.attempt,
        )
        return Pending(launch=launch, placement=placement, request=request)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why a task cannot start on this node, and whether a retry could help (an image
    pulled or a runtime installed meanwhile) or not (a program its user cannot run, a
    refused mount: the job fails at once)."""

    message: str
    retriable: bool


def mount_problem(launch: TaskLaunch) -> str | None:
    """Why a mount of ``launch`` cannot be given to its container (a link on its path,
    not a directory, out of its user's reach: ``tenantfs.check_mount_source``), or None.
    The runtime resolves a mount's source as root, so this is checked as the task's user
    just before its start."""
    reader = None if launch.identity is None else launch.identity.reader()
    for path in launch.mounts:
        try:
            check_mount_source(path, reader=reader)
        except TenantPathRefused as refused:
            return str(refused)
    return None


def _unstarted(
    launch: TaskLaunch, workdir: Path, placement: Placement, *, logs: Path, **fields: Any
) -> ProcessRecord:
    """The record of ``launch`` before it runs, kept in ``workdir``, its logs written in
    ``logs``, reached at ``placement``: the launcher fills in its pid and start time once
    it does."""
    return ProcessRecord(
        job=launch.job,
        task=launch.task,
        node=launch.node,
        pid=0,
        start_time=0.0,
        workdir=str(workdir),
        logs=str(logs),
        workload=launch.workload,
        gpus=launch.gpus,
        endpoint=endpoint(placement.host, placement.port),
        **fields,
    )
