"""Limits measured from inside the tasks of a server run as root, by the tasks themselves.

A task given half a CPU burns CPU as fast as it can for a while and measures its own CPU
time over the wall time that passed: it cannot get more than about half. A task given
256Mi starts children that each stay well below that but together would touch 1 GiB:
the kernel kills them for the task as a whole, and the job says OOMKilled. Where the
host has no cgroup controllers this server can use, there is nothing to measure and the
tests are skipped with the server's own reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.executors.cgroups import GROUPED, host_isolation
from tests.integration.tenancy import servers
from tests.integration.tenancy.servers import QUEUE, Up, job, output

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cgroup limits need root here")

#: Busy for two seconds of wall time, then prints its CPU time over that wall time.
BURN = (
    "import json, os, time\n"
    "start, before = time.monotonic(), os.times()\n"
    "while time.monotonic() - start < 2.0:\n"
    "    pass\n"
    "after, wall = os.times(), time.monotonic() - start\n"
    "cpu = (after.user - before.user) + (after.system - before.system)\n"
    "print('RESULT ' + json.dumps({'cpu': cpu, 'wall': wall}), flush=True)\n"
)

#: Eight children of 128 MiB each, all alive at once: 1 GiB together. Fails if any failed.
HOG = (
    "import subprocess, sys\n"
    "child = 'import time; x = b\"x\" * (128 << 20); time.sleep(3)'\n"
    "kids = [subprocess.Popen([sys.executable, '-c', child]) for _ in range(8)]\n"
    "codes = [kid.wait() for kid in kids]\n"
    "print('children ended with', codes, flush=True)\n"
    "sys.exit(0 if all(code == 0 for code in codes) else 1)\n"
)


@pytest.fixture
def up(world: Path, tmp_path: Path) -> Iterator[Up]:
    isolation = host_isolation()
    if isolation.kind not in GROUPED:
        pytest.skip(f"no cgroup limits on this host: {isolation.describe()}")
    served = servers.start(world / "data", tmp_path)
    served.admin().queue(QUEUE)
    yield served
    served.stop()


def test_a_half_cpu_task_gets_about_half_a_cpu(up: Up) -> None:
    python = servers.python_for_others()
    carol = up.user("carol")
    carol.post("/api/v1/jobs", job("burn", [python, "-c", BURN], cpu="500m"))
    assert carol.wait_phase("burn", "Succeeded", "Failed")["phase"] == "Succeeded"
    measured = servers.result(carol, "burn")
    assert measured["wall"] >= 2.0
    assert 0.0 < measured["cpu"] / measured["wall"] <= 0.7, measured  # 1.0 unlimited


def test_a_256mi_task_whose_children_together_touch_1gi_is_oom_killed(up: Up) -> None:
    python = servers.python_for_others()
    carol = up.user("carol")
    hog = job("hog", [python, "-c", HOG], memory="256Mi")
    hog["spec"]["maxRetry"] = 0  # the first OOM kill ends it
    carol.post("/api/v1/jobs", hog)
    ended = carol.wait_phase("hog", "Succeeded", "Failed")
    assert ended["phase"] == "Failed", output(carol, "hog")
    assert "OOMKilled" in ended["message"], ended
    assert "children ended with" in output(carol, "hog")  # the task itself lived to say so
