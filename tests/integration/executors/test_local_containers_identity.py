"""An image task of a user runs as that user's identity; its client, root, is never
turned against the server by what the task leaves in its directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.executors.base import TaskEventKind
from phalanx.executors.failures import NO_IDENTITY
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.process import EXIT_FILE
from tests.integration.executors.harness import Harness
from tests.integration.tenancy.servers import unused_uid

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching uids needs root")

CAROL = TaskIdentity(
    uid=unused_uid(71900), gid=unused_uid(71900), name="carol", groups=(unused_uid(71950),)
)


@pytest.fixture
def per_user(busybox_image: str, tmp_path: Path) -> Iterator[Harness]:
    shared = tmp_path.parent / f"{tmp_path.name}-world"
    shared.mkdir(mode=0o711)
    shared.chmod(0o711)
    h = Harness(tmp_path / "data", tasks_dir=shared / "tasks", per_user=True)
    yield h
    h.close()


def test_an_image_task_runs_as_its_identity_and_owns_its_files(
    per_user: Harness, busybox_image: str
) -> None:
    launch = per_user.launch(
        command="id -u; id -g; id -G; touch made", image=busybox_image, identity=CAROL
    )
    per_user.start(launch)
    assert per_user.wait_event("t0").exit_code == 0
    workdir = per_user.workdir(launch)
    uid, gid, groups = (workdir / "stdout.log").read_text().splitlines()
    assert (int(uid), int(gid)) == (CAROL.uid, CAROL.gid)
    assert set(map(int, groups.split())) == {CAROL.gid, *CAROL.groups}
    for name in ("made", "stdout.log", "stderr.log"):
        status = (workdir / name).stat()
        assert (status.st_uid, status.st_gid) == (CAROL.uid, CAROL.gid)
    assert (workdir / "stdout.log").stat().st_mode & 0o777 == 0o600
    assert workdir.stat().st_mode & 0o777 == 0o700


def test_a_link_left_as_exit_code_is_never_written_through(
    per_user: Harness, busybox_image: str, tmp_path: Path
) -> None:
    target = tmp_path / "roots-file"
    target.write_text("root's\n")
    launch = per_user.launch(
        command=f"ln -s {target} {EXIT_FILE}; exit 4", image=busybox_image, identity=CAROL
    )
    per_user.start(launch)
    assert per_user.wait_event("t0").exit_code == 4
    assert target.read_text() == "root's\n"


def test_an_image_task_without_an_identity_never_runs(
    per_user: Harness, busybox_image: str
) -> None:
    per_user.start(per_user.launch(command="true", image=busybox_image))
    assert per_user.wait_event("t0", TaskEventKind.FAILED_TO_START).message == NO_IDENTITY
