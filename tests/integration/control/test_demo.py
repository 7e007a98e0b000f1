"""``phalanx demo`` for real: a server, the DDP gang, the shared cards, the summary; and
what it says at the end without ``--keep`` (no export lines for a server that is gone)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

#: SQLite only: the demo runs on the embedded default, SQLite, as make demo does.
BACKENDS = ("sqlite",)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="PyTorch is not installed (make test and make demo install its CPU build)",
)


def test_the_demo_runs_and_points_out_its_gang_and_shared_cards() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "demo", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=600,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "ddp-train  Succeeded" in out and "ranks agree on the weights: True" in out
    assert "gang: ddp-train's 2 workers were placed together" in out
    assert "sharing: gpu: 0.5 trials share a card" in out
    assert "export PHALANX" not in out  # its server is gone: nothing to point a CLI at
    assert "phalanx demo --keep keeps it serving" in " ".join(out.split())
    assert "Traceback" not in out + done.stderr
