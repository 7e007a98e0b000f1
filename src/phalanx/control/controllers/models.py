"""The model registrar: each succeeded job's model outputs become model versions.

Guarantees:
- a job whose roles declare models (``model_intake = pending``) is registered once it
  succeeds: each model's directory, written by the role's first task under its working
  directory (on the server's host, or on the Ray node it ran on, read by that node's
  agent), is copied into the model store (``phalanx.models``) and recorded as the
  model's next version with its lineage, in one transaction that also marks the job
  ``done``; a crash before that commit leaves the job pending and the copy is made again
  (the store is content-addressed, so nothing is stored twice);
- the directory is read as ``phalanx.tenantfs`` reads what a tenant controls: no link
  followed, nothing that blocks, only what the task's user could read, capped in bytes,
  files and time; what is refused marks the job ``failed`` with an event naming the
  path, the reason and the fix (the job itself stays Succeeded);
- a model belongs to its first version's user: another user's job cannot add to it;
- a version whose job asked for an image (``model.image``) is built into one after it
  is recorded (Building, then Built or Failed with the reason; again after a restart);
- files no kept version names leave the store within a pass of a deletion.
The copy runs on this controller's own thread, never on the scheduler's tick.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from phalanx.control.controllers.ticker import Ticker
from phalanx.control.store import Session
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import model_versions as stored
from phalanx.control.store import runs as stored_runs
from phalanx.control.store.database import Database
from phalanx.control.store.models import JobRow
from phalanx.domain.errors import ContentError, InvalidInput
from phalanx.executors.containers.runtime import ContainerRuntime
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.process import dir_name
from phalanx.models.image import ImageBuildFailed, build_image, image_tag
from phalanx.models.manifest import Manifest
from phalanx.models.store import ModelStore
from phalanx.spec.job import JobDocument, RoleSpec
from phalanx.tenantfs import Limits, Place

log = logging.getLogger(__name__)

#: Jobs registered per pass.
BATCH: Final = 8
#: How much one model may hold, and how long its copy may take.
MODEL_LIMITS: Final = Limits(max_bytes=64 << 30, max_files=100_000, seconds=3600.0)


class IntakeRefused(ContentError):
    """Why one model of a job cannot be registered (a message for the job's events)."""


class NodeIntake(Protocol):
    """Reads a model a task wrote on another host (``executors.ray.models.NodeModels``)."""

    def intake(
        self,
        node: str,
        job: str,
        task: str,
        path: str,
        *,
        identity: TaskIdentity | None,
        limits: Limits,
    ) -> Manifest:
        """``path`` of ``task``'s working directory on ``node``, copied into the store."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Where:
    """Where the registrar finds what tasks wrote: the tasks dir of this server (a task's
    working directory is ``TASKS/<job>/<task>``, ``phalanx.executors.taskdirs``), or
    ``nodes`` that read it on the task's node (tasks on a Ray cluster), and as which
    identity each user's tasks run (None: the server's own); and how it builds images:
    the container runtime and a directory of the server's own to build in."""

    tasks_dir: Path
    nodes: NodeIntake | None = None
    identity_of: Callable[[str], TaskIdentity] | None
    runtime: ContainerRuntime | None = None  # builds images of versions (None: none here)
    scratch: Path = Path("/nonexistent")  # the server's own directory to build them in


class ModelRegistrar:
    """See the module docstring. ``start``/``stop`` its thread; ``poke`` when jobs end."""

    def __init__(
        self, db: Database, store: ModelStore, where: Where, *, period: float = 5.0
    ) -> None:
        self.db, self.store, self.where = db, store, where
        self._period = period
        # The versions the store was last collected down to (None: not since the start,
        # when a deletion may not have been collected yet).
        self._kept: set[str] | None = None
        self._ticker = Ticker("phalanx-models", self.tick)

    def start(self) -> None:
        """Start registering on a thread of its own."""
        self._ticker.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the copy under way; False when it still ran after ``timeout``."""
        return self._ticker.stop(timeout)

    def poke(self) -> None:
        """Look for succeeded jobs soon (jobs ended)."""
        self._ticker.poke()

    def collect_soon(self) -> None:
        """Versions were deleted: remove their files soon (each pass compares the kept
        versions with those it last collected down to, so a deletion not yet committed
        when this is called is collected on a later pass)."""
        self._ticker.poke()

    def tick(self) -> float:
        """One pass: register what is owed, then collect; seconds until the next."""
        owed: Sequence[JobRow] = ()
        try:
            with self.db.session() as session:
                owed = stored.owed(session, BATCH)
                tasks = {row.id: _first_tasks(session, row.id) for row in owed}
            for row in owed:
                self._register(row, tasks[row.id])
            self._build_images()
            with self.db.session() as session:
                kept = stored.kept_digests(session)
            if kept != self._kept:
                removed = self.store.collect(kept)
                self._kept = kept
                if removed:
                    log.info("model store: removed %d files no version names", removed)
        except Exception:  # a store or database outage: try again next pass
            log.exception("model registration pass failed; trying again")
        return 0.0 if len(owed) == BATCH else self._period

    def _register(self, job: JobRow, tasks: dict[str, tuple[str, str | None]]) -> None:
        """Copy each model of ``job`` into the store, then record the versions, the
        refusals as events, and the job's intake as done or failed, in one transaction."""
        made: list[tuple[RoleSpec, Manifest]] = []
        problems: list[str] = []
        for role in JobDocument.model_validate(job.document).spec.roles:
            if role.model is not None:
                try:
                    made.append((role, self._intake(job, role, tasks.get(role.name))))
                except IntakeRefused as refused:
                    problems.append(f"model {role.model.name} of role {role.name}: {refused}")
        now = time.time()
        with self.db.write() as session:
            for role, manifest in made:
                new = _new_version(session, job, role, manifest)
                owner = stored.owners(session, [new.name]).get(new.name)
                if owner is not None and owner != job.user:
                    problems.append(
                        f"model {new.name} of role {role.name}: it belongs to user {owner}; "
                        "fix: give the model another name in the job"
                    )
                    continue
                number = stored.add(session, new, now=now)
                line = f"{new.name}:v{number} ({new.digest}, {new.files} files, {new.size} bytes)"
                stored_jobs.add_event(
                    session, job.id, time=now, kind="ModelRegistered", message=line
                )
            for line in problems:
                stored_jobs.add_event(
                    session, job.id, time=now, kind="ModelNotRegistered", message=line
                )
            stored.settle(session, job.id, stored.FAILED if problems else stored.DONE)

    def _build_images(self) -> None:
        """Build the images versions wait for, one after the other; each ends Built or
        Failed with the reason."""
        with self.db.session() as session:
            waiting = [
                (row.id, row.name, row.version, row.digest) for row in stored.images_owed(session)
            ]
        for version_id, name, number, digest in waiting:
            tag = image_tag(name, number)
            built: str | None = tag
            message = ""
            try:
                if self.where.runtime is None:
                    raise ImageBuildFailed(
                        "no podman or docker on the server's host; fix: install podman there"
                    )
                build_image(self.store, digest, tag, self.where.runtime, scratch=self.where.scratch)
            except (ImageBuildFailed, ContentError, OSError) as error:
                built, message = None, str(error)
            with self.db.write() as session:
                stored.image_built(session, version_id, image=built, message=message)

    def _intake(self, job: JobRow, role: RoleSpec, task: tuple[str, str | None] | None) -> Manifest:
        """Copy ``role``'s model directory, written by its first task (``task``: its name
        and node), into the store as ``job``'s user could read it, on this host or on
        that node; its manifest."""
        assert role.model is not None
        if task is None:
            raise IntakeRefused(f"the job has no task {role.name}-0 to have written it")
        name, node = task
        try:
            identity = None if self.where.identity_of is None else self.where.identity_of(job.user)
            if self.where.nodes is not None:
                if node is None:
                    raise IntakeRefused(f"task {name} of the job never ran on a node")
                return self.where.nodes.intake(
                    node, job.name, name, role.model.path, identity=identity, limits=MODEL_LIMITS
                )
            place = Place(
                self.where.tasks_dir, f"{dir_name(job.name)}/{dir_name(name)}/{role.model.path}"
            )
            reader = None if identity is None else identity.reader()
            return self.store.intake(place, reader=reader, limits=MODEL_LIMITS)
        except (InvalidInput, ContentError) as error:
            raise IntakeRefused(str(error)) from None
        except OSError as error:
            raise IntakeRefused(f"the model store could not be written: {error}") from None


def _first_tasks(session: Session, job_id: int) -> dict[str, tuple[str, str | None]]:
    """Each role's first task's name and the node it last ran on, by role."""
    return {
        task.role: (task.name, task.node)
        for task in stored_jobs.tasks(session, job_id)
        if task.index == 0
    }


def _new_version(
    session: Session, job: JobRow, role: RoleSpec, manifest: Manifest
) -> stored.NewVersion:
    """The version ``role`` of ``job`` made, with its lineage: the command, image and
    environment it ran with, and the pipeline run and step it was part of (checked to be
    a run of the same user) with the run's params."""
    assert role.model is not None
    run_id, step = role.env.get("PHALANX_RUN_ID"), role.env.get("PHALANX_STEP")
    lineage: dict[str, Any] = {
        "command": list(role.command),
        "image": role.image,
        "env": sorted(role.env),
    }
    found = None if run_id is None else stored_runs.origin(session, run_id)
    if found is not None and found[0] == job.user:
        lineage["pipeline"], lineage["params"] = found[1], found[2]
    else:
        run_id = step = None
    return stored.NewVersion(
        name=role.model.name,
        digest=manifest.digest,
        size=manifest.size,
        files=len(manifest.files),
        user=job.user,
        job=job.name,
        role=role.name,
        run_id=run_id,
        step=step,
        lineage=lineage,
        image=role.model.image,
    )
