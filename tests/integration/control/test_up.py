"""``phalanx up``: what it checks before starting and what it tells the user.

``Server.serve`` is replaced by a stub that only releases the database, so these tests
see everything ``up`` does except blocking on the API.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli import up
from phalanx.cli.main import app
from phalanx.control import auth, metrics
from phalanx.control.server import Server, Stopped, default_workspace_path
from phalanx.control.tenancy.places import check_tasks_dir, check_workspace_dir, default_tasks_dir
from tests.integration.control.serving import CLUSTER


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Server]:
    """Every server ``up`` would have served."""
    seen: list[Server] = []

    def serve(self: Server) -> Stopped:
        seen.append(self)
        self.db.close()
        return Stopped(by=None, controller_stopped=True)

    monkeypatch.setattr(Server, "serve", serve)
    return seen


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_first_start_prints_the_exports_then_later_starts_name_the_token_file(
    served: list[Server], tmp_path: Path
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    data = tmp_path / "data"
    port = free_port()
    args = ["up", "--data-dir", str(data), "--port", str(port), "--cluster", str(cluster)]
    args += ["--shared-identity"]  # as root, tasks beside a data dir only root may reach
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    token = (data / "admin.token").read_text().strip()
    assert f"export PHALANX_SERVER=http://127.0.0.1:{port}\n" in first.stdout
    assert f"export PHALANX_TOKEN={token}\n" in first.stdout
    assert str(data / "admin.token") in first.stdout
    assert f"/metrics takes the token in {data / 'metrics.token'}" in first.stdout
    assert len(served) == 1 and served[0].settings.port == port

    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert token not in again.stdout
    assert f'export PHALANX_TOKEN="$(cat {data / "admin.token"})"' in again.stdout


def test_the_data_dir_defaults_to_the_environment(
    served: list[Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHALANX_DATA_DIR", str(tmp_path / "from-env"))
    assert up.default_data_dir() == tmp_path / "from-env"
    monkeypatch.delenv("PHALANX_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(up.os, "geteuid", lambda: 1000)
    assert up.default_data_dir() == tmp_path / "xdg" / "phalanx"
    # Root's is a system service's: under /var/lib, not in root's own (0700) home.
    monkeypatch.setattr(up.os, "geteuid", lambda: 0)
    assert up.default_data_dir() == Path("/var/lib/phalanx")
    assert up.ADMIN_TOKEN_FILE == auth.ADMIN_TOKEN_FILE
    assert up.METRICS_TOKEN_FILE == metrics.METRICS_TOKEN_FILE


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--executor", "k8s"], "--executor: 'k8s' is not available; fix: use one of: local, ray"),
        (["--executor", "ray"], "--ray-address: the ray executor needs it; fix: give the Ray head"),
        (["--ray-address", "127.0.0.4:6379"], "--ray-address: only the ray executor takes it"),
        (
            ["--executor", "ray", "--ray-address", "local"],
            "--ray-address: 'local' would start a Ray cluster here or attach one left on this host",
        ),
        (["--cluster", "missing.yaml"], "missing.yaml: cannot read"),
        (["--scheduler", "nope"], "'nope' is neither a shipped policy nor a file"),
        (["--db", "not a url"], "'not a url' is not a database URL"),
        (["--task-uids", "70000"], "--task-uids: '70000' is not FIRST-LAST"),
        (["--task-uids", "0-999"], "--task-uids: 0-999 is not a range of regular uids"),
        (["--workspace", "nosuch://x"], "--workspace: 'nosuch://x': fsspec knows no filesystem"),
        (["--workspace", "memory://x"], "a memory filesystem lives in the server alone"),
        (["--reports", "no-such-folder"], "--reports: no-such-folder is not a directory"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(
    served: list[Server], tmp_path: Path, extra: list[str], expected: str
) -> None:
    data = tmp_path / "data"
    result = CliRunner().invoke(
        app,
        ["up", "--data-dir", str(data), "--port", str(free_port()), "--shared-identity", *extra],
    )
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: ") and expected in result.stderr
    assert "Traceback" not in result.output
    assert not served
    assert not (data / "admin.token").exists()


def test_a_port_in_use_is_refused(served: list[Server], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            app,
            ["up", "--data-dir", str(tmp_path / "data"), "--port", str(port), "--shared-identity"],
        )
    assert result.exit_code == 1, result.output
    assert f"--port: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert not served


def test_a_loose_data_dir_from_an_earlier_start_is_made_private(
    served: list[Server], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    args = ["up", "--data-dir", str(data), "--port", str(free_port()), "--shared-identity"]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert stat.S_IMODE(data.stat().st_mode) == 0o700  # fresh: private
    token = (data / "admin.token").read_text()
    data.chmod(0o755)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert (data / "admin.token").read_text() == token and len(served) == 2


def test_a_data_dir_others_could_write_is_refused_at_start(
    served: list[Server], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "admin.token").write_text("phx_planted\n")
    data.chmod(0o777)
    args = ["up", "--data-dir", str(data), "--port", str(free_port()), "--shared-identity"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert (
        result.stderr.startswith("error: ") and "could be written by other users" in result.stderr
    )
    assert "fix: check what is in it, then chmod 700" in result.stderr
    assert "Traceback" not in result.output
    assert not served and not (data / "phalanx.db").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="tasks run as other uids only under root")
def test_as_root_a_tasks_dir_other_uids_cannot_reach_is_refused_before_anything_is_written(
    served: list[Server], tmp_path: Path
) -> None:
    data = tmp_path / "data"  # pytest's temporary root is root's alone (0700)
    result = CliRunner().invoke(app, ["up", "--data-dir", str(data), "--port", str(free_port())])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(
        "error: --tasks-dir: tasks run as their users' own uids and must reach the tasks dir "
        f"{tmp_path}/data-tasks"
    )
    assert "does not let other users pass (mode 0700)" in result.stderr
    assert "fix: give a tasks dir whose parent directories every user may pass" in result.stderr
    assert not served and not data.exists()
    inside = CliRunner().invoke(
        app,
        ["up", "--data-dir", str(data), "--port", str(free_port()), "--tasks-dir", str(data / "t")],
    )
    assert inside.exit_code == 1 and "are one inside the other" in inside.stderr


def test_roots_defaults_beside_var_lib_phalanx_are_reachable_by_every_task() -> None:
    data = up.SYSTEM_DATA_DIR
    tasks = default_tasks_dir(data, per_user=True)
    workspace = default_workspace_path(data, per_user=True)
    assert (tasks, workspace) == (
        Path("/var/lib/phalanx-tasks"),
        Path("/var/lib/phalanx-workspace"),
    )
    check_tasks_dir(tasks, data)  # /var/lib lets every user pass: nothing is refused
    check_workspace_dir(workspace, data)


@pytest.mark.skipif(os.geteuid() != 0, reason="tasks run as other uids only under root")
def test_as_root_a_workspace_steps_cannot_reach_is_refused_before_anything_is_written(
    served: list[Server], tmp_path: Path
) -> None:
    world = Path(tempfile.mkdtemp(prefix="phalanx-up-", dir="/tmp"))
    try:
        world.chmod(0o711)  # the data dir's and tasks dir's parent: every user passes
        args = ["up", "--data-dir", str(world / "data"), "--port", str(free_port())]
        hidden = tmp_path / "workspace"  # pytest's temporary root is root's alone (0700)
        result = CliRunner().invoke(app, [*args, "--workspace", str(hidden)])
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(
            f"error: --workspace: tasks run as their users' own uids and must reach the "
            f"workspace {hidden}, but "
        )
        assert "fix: give a workspace whose parent directories every user may pass" in (
            result.stderr
        )
        assert not served and not (world / "data").exists()
        inside = CliRunner().invoke(app, [*args, "--workspace", str(world / "data" / "ws")])
        assert inside.exit_code == 1 and "--workspace: the workspace" in inside.stderr
        assert "are one inside the other" in inside.stderr
        # The default beside the data dir is reachable: the server starts.
        assert CliRunner().invoke(app, args).exit_code == 0 and served
        assert stat.S_IMODE((world / "data-workspace").stat().st_mode) == 0o711
    finally:
        shutil.rmtree(world)


def test_a_shared_identity_is_said_at_start_as_a_warning(
    served: list[Server], tmp_path: Path
) -> None:
    args = ["up", "--data-dir", str(tmp_path / "data"), "--port", str(free_port())]
    result = CliRunner().invoke(app, [*args, "--shared-identity"])
    assert result.exit_code == 0, result.output
    warning = next(line for line in result.stderr.splitlines() if "shared identity" in line)
    assert warning.startswith("WARNING: shared identity (--shared-identity): every user's tasks")
    assert "Fix: start phalanx up as root without --shared-identity" in warning


@pytest.mark.skipif(os.geteuid() != 0, reason="tasks run as other uids only under root")
def test_as_root_a_tasks_dir_that_is_a_link_is_refused(
    served: list[Server], tmp_path: Path
) -> None:
    world = Path(tempfile.mkdtemp(prefix="phalanx-up-", dir="/tmp"))
    try:
        world.chmod(0o711)
        (world / "tasks").symlink_to(tmp_path)  # tasks would land where the link points
        args = ["up", "--data-dir", str(world / "data"), "--port", str(free_port())]
        result = CliRunner().invoke(app, [*args, "--tasks-dir", str(world / "tasks")])
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(f"error: --tasks-dir: {world / 'tasks'} cannot be made")
        assert "not a link" in result.stderr and not served
    finally:
        shutil.rmtree(world)
