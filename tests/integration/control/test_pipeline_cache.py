"""The step cache through the real server, local executor and CLI (issue 19, evidence
2): an identical run is all cache hits; a changed param or one byte of a listed file
invalidates exactly the step that reads it and what is downstream of it; a deleted
cached artifact is a miss, not a crash; ``--no-cache`` and ``--refresh-cache``; the
``phalanx cache`` commands; and a changed image reruns its step (in a podman container
that reads and writes the run's artifacts) and what is downstream of it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from tests.integration.control.serving import Api, running_server
from tests.integration.control.test_cli import ok, phalanx, refused
from tests.integration.control.test_images import PODMAN_CLUSTER
from tests.integration.control.test_pipeline_resume import counts, step_jobs
from tests.integration.control.test_pipelines import admin, ended, pipeline, run, steps
from tests.integration.images import derived_image

# Every step counts its executions in DIR; train runs DIR/train.sh, listed in its
# cache.files; verbose is excluded from train's key, and prep does not read it.
CACHED = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: cached}
spec:
  params: {lr: 0.01, verbose: 0}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}, cache: {enabled: true}}
  steps:
    prep:
      command: ["sh", "-c", "echo x >> DIR/prep.count; echo hello > {{outputs.data}}"]
      outputs: {artifacts: [data]}
    train:
      inputs: {artifacts: {data: "{{steps.prep.outputs.data}}"}}
      command: ["sh", "DIR/train.sh", "{{inputs.data}}", "{{outputs.model}}", "{{params.lr}}", "{{params.verbose}}"]
      cache: {enabled: true, files: [DIR/train.sh], excludeParams: [verbose]}
      outputs: {artifacts: [model]}
    validate:
      inputs: {artifacts: {model: "{{steps.train.outputs.model}}"}}
      command: ["sh", "-c", "echo x >> DIR/validate.count; grep -q HELLO {{inputs.model}}"]
"""

TRAIN = 'echo x >> DIR/train.count; tr a-z A-Z < "$1" > "$2"; echo "lr=$3" >> "$2"\n'


def phases(view: dict[str, object]) -> list[str]:
    return [str(s["phase"]) for s in view["steps"]]  # type: ignore[attr-defined]


def executed(directory: Path) -> tuple[int, int, int]:
    return (counts(directory, "prep"), counts(directory, "train"), counts(directory, "validate"))


def finished(api: Api, run_id: str) -> dict[str, object]:
    view = ended(api, run_id)
    assert view["phase"] == "Succeeded", json.dumps(view, indent=1)
    return view


def test_the_cache_serves_identical_steps_and_reruns_exactly_what_changed(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.sh").write_text(TRAIN.replace("DIR", str(work)))
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(CACHED.replace("DIR", str(work))))
        first = run(api, "cached")
        assert phases(finished(api, first)) == ["Succeeded"] * 3
        assert executed(work) == (1, 1, 1)
        entries = api.get("/api/v1/cache", pipeline="cached")
        assert sorted(e["step"] for e in entries) == ["prep", "train", "validate"]
        assert {e["run_id"] for e in entries} == {first}  # lineage
        workspace = tmp_path / "data" / "workspace" / "runs"
        train_entry = next(e for e in entries if e["step"] == "train")
        assert train_entry["artifacts"]["model"]["url"] == str(
            workspace / first / "train" / "model"
        )
        assert train_entry["artifacts"]["model"]["hash"].startswith("sha256:")
        assert train_entry["material"]["params"] == {"lr": 0.01}  # verbose excluded

        # The same run again: every step a hit, no job, nothing executed.
        second = run(api, "cached")
        view = finished(api, second)
        assert phases(view) == ["Cached"] * 3 and step_jobs(api, second) == []
        assert executed(work) == (1, 1, 1)
        units = steps(view)
        assert units["train"]["reason"].startswith(f"cache hit {train_entry['key'][:12]}")
        assert units["train"]["outputs"] == {"model": str(workspace / first / "train" / "model")}
        assert "cache hit" in ok(phalanx(server, "describe", "run", second))
        # An excluded param changes nothing.
        assert phases(finished(api, run(api, "cached", verbose="1"))) == ["Cached"] * 3

        # One param: train (which reads it) and validate (its model changed) run again.
        third = run(api, "cached", lr="0.5")
        assert phases(finished(api, third)) == ["Cached", "Succeeded", "Succeeded"]
        assert executed(work) == (1, 2, 2)

        # One byte of the listed script: train and its downstream again, prep served.
        (work / "train.sh").write_text(TRAIN.replace("DIR", str(work)).replace("lr=", "lr:"))
        fourth = run(api, "cached")
        assert phases(finished(api, fourth)) == ["Cached", "Succeeded", "Succeeded"]
        assert executed(work) == (1, 3, 3)
        assert (workspace / fourth / "train" / "model").read_text() == "HELLO\nlr:0.01\n"

        # The cached artifact of prep deleted: a miss, prep runs again; train's key is
        # the same (the same content) and it is served.
        shutil.rmtree(workspace / first / "prep")
        fifth = run(api, "cached")
        assert phases(finished(api, fifth)) == ["Succeeded", "Cached", "Cached"]
        assert executed(work) == (2, 3, 3)

        # --no-cache: everything runs and no entry is written.
        before = {e["key"]: e["run_id"] for e in api.get("/api/v1/cache")}
        sixth = ok(phalanx(server, "pipeline", "run", "cached", "--no-cache")).strip()
        assert phases(finished(api, sixth)) == ["Succeeded"] * 3
        assert executed(work) == (3, 4, 4)
        assert "Cache" in ok(phalanx(server, "describe", "run", sixth))
        assert {e["key"]: e["run_id"] for e in api.get("/api/v1/cache")} == before
        # --refresh-cache: everything runs, and the entries are its own.
        seventh = ok(phalanx(server, "pipeline", "run", "cached", "--refresh-cache")).strip()
        assert phases(finished(api, seventh)) == ["Succeeded"] * 3
        assert executed(work) == (4, 5, 5)
        after = {e["key"]: e["run_id"] for e in api.get("/api/v1/cache")}
        assert set(after) == set(before)
        assert [k for k, r in after.items() if r == seventh] != []
        both = refused(
            phalanx(server, "pipeline", "run", "cached", "--no-cache", "--refresh-cache")
        )
        assert "contradict" in both


def test_the_cache_commands_list_show_and_evict(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.sh").write_text(TRAIN.replace("DIR", str(work)))
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(CACHED.replace("DIR", str(work))))
        first = run(api, "cached")
        finished(api, first)
        listed = json.loads(
            ok(phalanx(server, "cache", "list", "--pipeline", "cached", "-o", "json"))
        )
        assert len(listed) == 3
        table = ok(phalanx(server, "cache", "list"))
        assert table.splitlines()[0].split() == ["KEY", "PIPELINE", "STEP", "RUN", "AGE"]
        train = next(e for e in listed if e["step"] == "train")
        shown = ok(phalanx(server, "cache", "show", train["key"][:16]))
        assert train["key"] in shown and "train.sh" in shown and first in shown
        created = yaml.safe_load(shown)["created_at"]  # a time for people, not the epoch's
        assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ", created), created
        assert "no cache entry" in refused(phalanx(server, "cache", "show", "0" * 64))

        # An entry is its user's: bob neither sees, shows nor evicts the admin's, and
        # running the same pipeline he is served none of them and overwrites none.
        bob = api.user("bob")
        assert bob.get("/api/v1/cache") == []
        assert bob.http.get(f"/api/v1/cache/{train['key']}").status_code == 404
        refusal = bob.http.delete(f"/api/v1/cache/{train['key']}")
        assert refusal.status_code == 404, refusal.text
        assert bob.http.delete("/api/v1/cache", params={"pipeline": "cached"}).json() == []
        his = bob.post("/api/v1/pipelines/cached/runs", {})["id"]
        assert phases(finished(bob, his)) == ["Succeeded"] * 3
        assert executed(work) == (2, 2, 2)
        assert {e["user"] for e in bob.get("/api/v1/cache")} == {"bob"}
        assert {e["key"]: e["run_id"] for e in api.get("/api/v1/cache") if e["user"] != "bob"} == {
            e["key"]: e["run_id"] for e in listed
        }

        evicted = ok(phalanx(server, "cache", "evict", train["key"][:16]))
        assert evicted == f"cache/{train['key'][:16]} evicted\n"
        again = run(api, "cached")
        assert phases(finished(api, again)) == ["Cached", "Succeeded", "Cached"]
        assert executed(work) == (2, 3, 2)

        gone = ok(phalanx(server, "cache", "evict", "--pipeline", "cached")).splitlines()
        assert len(gone) == 6 and api.get("/api/v1/cache") == []
        assert "give a KEY or --pipeline" in refused(phalanx(server, "cache", "evict"))
        assert api.http.delete("/api/v1/cache/" + "0" * 64).status_code == 404


# train runs in IMAGE, each variant of which has another /flavor; prep and validate run
# on the host.
IMAGED = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: imaged}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}, cache: {enabled: true}}
  steps:
    prep:
      command: ["sh", "-c", "echo x >> DIR/prep.count; echo hello > {{outputs.data}}"]
      outputs: {artifacts: [data]}
    train:
      image: IMAGE
      inputs: {artifacts: {data: "{{steps.prep.outputs.data}}"}}
      command: ["sh", "-c", "cat {{inputs.data}} /flavor > {{outputs.model}}"]
      outputs: {artifacts: [model]}
    validate:
      inputs: {artifacts: {model: "{{steps.train.outputs.model}}"}}
      command: ["sh", "-c", "echo x >> DIR/validate.count; grep -q hello {{inputs.model}}"]
"""


def test_a_changed_image_reruns_its_step_in_the_container_and_what_follows(
    busybox_image: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    plain = derived_image(busybox_image, {"/flavor": "plain\n"}, tmp_path / "plain")
    spicy = derived_image(busybox_image, {"/flavor": "spicy\n"}, tmp_path / "spicy")
    document = IMAGED.replace("DIR", str(work))
    with running_server(tmp_path, cluster=PODMAN_CLUSTER) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(document.replace("IMAGE", plain)))
        first = run(api, "imaged")
        assert phases(finished(api, first)) == ["Succeeded"] * 3
        workspace = tmp_path / "data" / "workspace" / "runs"
        # The container read prep's artifact and wrote its own, in the run's workspace.
        assert (workspace / first / "train" / "model").read_text() == "hello\nplain\n"
        assert phases(finished(api, run(api, "imaged"))) == ["Cached"] * 3

        changed = api.http.put(
            "/api/v1/pipelines/imaged", json=pipeline(document.replace("IMAGE", spicy))
        )
        assert changed.status_code == 200, changed.text
        third = run(api, "imaged")
        assert phases(finished(api, third)) == ["Cached", "Succeeded", "Succeeded"]
        assert (workspace / third / "train" / "model").read_text() == "hello\nspicy\n"
        assert (counts(work, "prep"), counts(work, "validate")) == (1, 2)
