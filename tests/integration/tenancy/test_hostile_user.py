"""A hostile user's job, on a server run as root as a cluster service is, finds nothing.

alice's job keeps a secret in its directory, prints to its log and keeps running with a
secret in its environment. bob's job then hunts: the admin token, the database files,
the server's records of its tasks, alice's logs, files and directory, anything readable
below the server's directories, alice's running process (found through /proc: signal
it, read its environment and working directory) and the server's process. Everything
is judged from what bob's job itself printed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.control.serving import wait_for
from tests.integration.tenancy import servers
from tests.integration.tenancy.servers import QUEUE, Up, job, output

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="per-user identities need a server run as root"
)

#: alice's job: a secret file, a line of output, a secret in its environment, then waits.
ALICE = (
    "import sys, time\n"
    "open('secret.txt', 'w').write('alice-secret-file')\n"
    "print('alice-secret-output', flush=True)\n"
    "time.sleep(600)\n"
)

#: bob's job: every attempt and what came of it, as one JSON line.
HUNT = """
import json, os, signal, sys

cfg = json.loads(sys.argv[1])
marker = cfg["marker"][::-1].encode()  # reversed in bob's own argv, so it does not match
mine = os.getcwd()


def read(path):
    try:
        with open(path, "rb") as handle:
            handle.read(4096)
        return "read"
    except PermissionError:
        return "denied"
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return f"error {error.errno}"


def listing(path):
    try:
        os.listdir(path)
        return "listed"
    except PermissionError:
        return "denied"
    except FileNotFoundError:
        return "missing"


def write(path):
    try:
        with open(path, "w") as handle:
            handle.write("bob was here")
        return "written"
    except PermissionError:
        return "denied"
    except FileNotFoundError:
        return "missing"


def signal_(pid, signum):
    try:
        os.kill(pid, signum)
        return "signalled"
    except PermissionError:
        return "denied"
    except ProcessLookupError:
        return "gone"


data, tasks, alice = cfg["data"], cfg["tasks"], cfg["alice"]
out = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "tried": {}}
tried = out["tried"]
for name in ("admin.token", "phalanx.db", "phalanx.db-wal", "phalanx.db-shm"):
    tried["read " + name] = read(os.path.join(data, name))
tried["list data dir"] = listing(data)
tried["list records"] = listing(os.path.join(data, "records"))
tried["list tasks dir"] = listing(tasks)
tried["list alice's job dir"] = listing(os.path.dirname(alice))
tried["list alice's dir"] = listing(alice)
for name in ("stdout.log", "stderr.log", "secret.txt", "exit_code"):
    tried["read alice's " + name] = read(os.path.join(alice, name))
tried["write into alice's dir"] = write(os.path.join(alice, "bob.txt"))

# The hunt: every file below the server's directories that can be read at all.
found = []
for top in (cfg["base"],):
    for path, dirs, files in os.walk(top):
        for name in files:
            full = os.path.join(path, name)
            if full.startswith(mine):
                continue
            try:
                with open(full, "rb") as handle:
                    content = handle.read(1 << 20)
            except OSError:
                continue
            if b"phx_" in content or content.startswith(b"SQLite format 3") or b"alice" in content:
                found.append(full)
out["found"] = found

# Processes: alice's, by its command line (world-readable), and the server's.
alice_pids, server_pids = [], []
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) == os.getpid():
        continue
    try:
        with open(f"/proc/{entry}/cmdline", "rb") as handle:
            command = handle.read()
    except OSError:
        continue
    if marker in command:
        alice_pids.append(int(entry))
    if b"phalanx.cli.main\\0up\\0--data-dir\\0" + cfg["data"].encode() in command:
        server_pids.append(int(entry))
out["alice pids"], out["server pids"] = alice_pids, server_pids
for pid in alice_pids + server_pids:
    tried[f"kill -0 {pid}"] = signal_(pid, 0)
    tried[f"SIGSTOP {pid}"] = signal_(pid, signal.SIGSTOP)
    tried[f"read /proc/{pid}/environ"] = read(f"/proc/{pid}/environ")
    tried[f"list /proc/{pid}/cwd"] = listing(f"/proc/{pid}/cwd")
    tried[f"list /proc/{pid}/fd"] = listing(f"/proc/{pid}/fd")
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.fixture
def up(world: Path, tmp_path: Path) -> Iterator[Up]:
    served = servers.start(world / "data", tmp_path)
    yield served
    served.stop()


def test_a_hostile_users_job_finds_no_token_database_or_other_tenants_files_or_processes(
    up: Up, world: Path
) -> None:
    python = servers.python_for_others()
    admin = up.admin()
    admin.queue(QUEUE)
    alice, bob = up.user("alice"), up.user("bob")  # `phalanx users create NAME`, nothing more
    marker = f"alice-marker-{os.getpid()}"
    diary = job("diary", [python, "-c", ALICE, marker])
    diary["spec"]["roles"][0]["env"] = {"ALICE_SECRET": "alice-secret-env"}
    alice.post("/api/v1/jobs", diary)
    alice.wait_phase("diary", "Running")
    wait_for(lambda: "alice-secret-output" in output(alice, "diary"), "alice's output")
    tasks = world / "data-tasks"
    alice_dir = tasks / "diary" / "diary-main-0"
    wait_for((alice_dir / "secret.txt").exists, "alice's secret file")

    cfg = {
        "data": str(up.data),
        "tasks": str(tasks),
        "alice": str(alice_dir),
        "base": str(world),
        "marker": marker[::-1],
    }
    bob.post("/api/v1/jobs", job("hunt", [python, "-c", HUNT, json.dumps(cfg)]))
    assert bob.wait_phase("hunt", "Succeeded", "Failed")["phase"] == "Succeeded", output(
        bob, "hunt"
    )
    seen = servers.result(bob, "hunt")

    # bob ran as a uid of his own, which is neither root nor alice's, with no group of root's.
    alice_uid = os.stat(alice_dir).st_uid
    assert seen["uid"] not in (0, alice_uid) and 0 not in [seen["gid"], *seen["groups"]]
    assert seen["groups"] == []  # not one supplementary group, the server's least of all
    # Everything that exists is refused to him; nothing readable was found.
    assert seen["alice pids"], "bob did not even see alice's process: the hunt proves nothing"
    assert seen["server pids"], "bob did not see the server's process"
    allowed = {
        attempt: outcome for attempt, outcome in seen["tried"].items() if outcome != "denied"
    }
    assert allowed == {}
    assert seen["found"] == []
    # alice's task is untouched: still running, its secret intact, never stopped by bob.
    assert alice.job("diary")["phase"] == "Running"
    for pid in seen["alice pids"]:
        status = Path(f"/proc/{pid}/status").read_text()
        assert "\nState:\tT" not in status  # SIGSTOP refused
    assert (alice_dir / "secret.txt").read_text() == "alice-secret-file"
    assert not (alice_dir / "bob.txt").exists()
    alice.post("/api/v1/jobs/diary/cancel", expect=200)
    alice.wait_phase("diary", "Cancelled")
