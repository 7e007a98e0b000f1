"""Datasets as pipeline steps' inputs through the real server, local executor and a real
S3 endpoint (moto's server; issue 39): the example of docs/tasks/pipelines.md (a command
step) and a job step whose role names the dataset read it, pinned to its listing; a
second run is served from the cache; an object added to the bucket and the dataset
listed again, the third run misses and its steps read the new file. A step whose dataset
was never listed waits for the listing (held back by a web source that answers late),
then runs (its retry carrying the listing its key was made with, so its entry is
written); one naming a dataset its user does not have fails naming the field and the
fix."""

from __future__ import annotations

import functools
import http.server
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.control.server import Server
from phalanx.workflow.datasets import KEYED
from tests.integration.control.serving import Api, wait_for
from tests.integration.control.test_datasets import BUCKET, listed, s3, secret
from tests.integration.control.test_pipeline_cache import finished, phases
from tests.integration.control.test_pipeline_resume import step_jobs
from tests.integration.control.test_pipelines import admin, ended, pipeline, run, steps

__all__ = ["s3"]  # a fixture these tests use

ROOT = Path(__file__).resolve().parents[3]

#: A job step whose one role lists the dataset, cached like the example's steps.
ROLES = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: roles}
spec:
  defaults: {cache: {enabled: true}}
  steps:
    files:
      job:
        queue: wf
        roles:
        - name: reader
          replicas: 1
          resources: {cpu: 100m, memory: 64Mi}
          datasets: [corpus]
          command: ["sh", "-c", "ls \\"$PHALANX_DATA_CORPUS\\" > {{outputs.names}}"]
      outputs: {artifacts: [names]}
"""


def example(prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Dataset and the Pipeline of the page's "Read a dataset" section, the
    dataset's source moved to ``prefix`` of the test bucket."""
    page = (ROOT / "docs" / "tasks" / "pipelines.md").read_text()
    section = page.split("## Read a dataset\n", 1)[1].split("\n## ", 1)[0]
    [text] = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    assert "s3://my-bucket/corpus" in text
    dataset, document = yaml.safe_load_all(text.replace("s3://my-bucket/corpus", prefix))
    return dataset, document


def pinned(api: Api, job: str) -> list[str]:
    """The datasets of the first role of ``job`` as stored."""
    found: list[str] = api.job(job)["document"]["spec"]["roles"][0]["datasets"]
    return found


def both(api: Api) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run of words and one of roles, at once, each to success."""
    words, roles = run(api, "words"), run(api, "roles")
    return finished(api, words), finished(api, roles)


def test_a_steps_cache_holds_until_its_dataset_is_listed_anew(server: Server, s3: Any) -> None:
    prefix = f"{BUCKET}/corpus-{uuid.uuid4().hex[:8]}"
    s3.pipe({f"{prefix}/a.txt": b"one two three\n", f"{prefix}/b.txt": b"four\n"})
    api = admin(server)
    secret(api, "s3", key="phalanx-test", secret="phalanx-test")
    dataset, document = example(f"s3://{prefix}")
    api.post("/api/v1/datasets", dataset)
    api.post("/api/v1/pipelines", document)
    api.post("/api/v1/pipelines", pipeline(ROLES))
    digest = listed(api, "corpus")["digest"]

    words, roles = both(api)
    assert phases(words) == ["Succeeded", "Succeeded"] and phases(roles) == ["Succeeded"]
    count, files = steps(words)["count"], steps(roles)["files"]
    assert Path(count["outputs"]["words"]).read_text().strip() == "4"
    assert Path(files["outputs"]["names"]).read_text().split() == ["a.txt", "b.txt"]
    for job in (count["job"], files["job"]):  # the listing the key was made with
        assert pinned(api, job) == [f"corpus@{digest}"]
    entries = {e["step"]: e for e in api.get("/api/v1/cache")}
    assert entries["count"]["material"]["datasets"] == {"corpus": digest}
    assert entries["files"]["material"]["datasets"] == {"corpus": digest}

    # Listed as it was: every step served from the cache, no job runs.
    words, roles = both(api)
    assert phases(words) == ["Cached", "Cached"] and phases(roles) == ["Cached"]
    assert step_jobs(api, words["id"]) == [] and step_jobs(api, roles["id"]) == []

    # An object added, the dataset listed again: a miss, and the new file is read.
    s3.pipe({f"{prefix}/c.txt": b"five six\n"})
    api.post("/api/v1/datasets/corpus/refresh", expect=200)
    again = listed(api, "corpus", after=digest)["digest"]
    words, roles = both(api)
    assert phases(words) == ["Succeeded", "Succeeded"] and phases(roles) == ["Succeeded"]
    count, files = steps(words)["count"], steps(roles)["files"]
    assert Path(count["outputs"]["words"]).read_text().strip() == "6"
    assert Path(files["outputs"]["names"]).read_text().split() == ["a.txt", "b.txt", "c.txt"]
    assert pinned(api, count["job"]) == [f"corpus@{again}"]
    # ... and the next run is served from the new entries.
    words, roles = both(api)
    assert phases(words) == ["Cached", "Cached"] and phases(roles) == ["Cached"]


WAITS = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: waits}
spec:
  onFailure: continue
  defaults: {queue: wf, resources: {cpu: 100m, memory: 64Mi}}
  steps:
    read:
      datasets: [slow]
      command: ["sh", "-c", "test -e MARK || { touch MARK; exit 1; }; cat \\"$PHALANX_DATA_SLOW/a.txt\\" > {{outputs.text}}"]
      outputs: {artifacts: [text]}
      cache: {enabled: true}
      retry: {maxAttempts: 2, on: [failed], backoff: {initial: 1}}
    lost:
      datasets: [nope]
      command: "true"
"""


@pytest.fixture
def late_web(tmp_path: Path) -> Iterator[tuple[str, threading.Event]]:
    """A directory served over HTTP on loopback that answers nothing until the event is
    set: its URL and the event (set after the test, so nothing waits on it past then)."""
    root = tmp_path / "served"
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.txt").write_bytes(b"alpha")
    gate = threading.Event()

    class Late(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            gate.wait(120)
            super().do_GET()

        def do_HEAD(self) -> None:
            gate.wait(120)
            super().do_HEAD()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    handler = functools.partial(Late, directory=str(root))
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{web.server_address[1]}/data/", gate
    finally:
        gate.set()
        web.shutdown()
        web.server_close()


def test_a_step_waits_for_a_first_listing_and_fails_for_a_dataset_not_there(
    server: Server, late_web: tuple[str, threading.Event], tmp_path: Path
) -> None:
    url, gate = late_web
    api = admin(server)
    try:
        api.post(
            "/api/v1/datasets",
            {"apiVersion": "phalanx/v1", "kind": "Dataset", "metadata": {"name": "slow"},
             "spec": {"source": url}},
        )  # fmt: skip
        api.post("/api/v1/pipelines", pipeline(WAITS.replace("MARK", str(tmp_path / "failed"))))
        run_id = run(api, "waits")

        def settled() -> dict[str, Any] | None:
            units = steps(api.get(f"/api/v1/runs/{run_id}"))
            return units if units["lost"]["phase"] == "Failed" and units["read"]["reason"] else None

        units = wait_for(settled, "lost failed, read waiting")
        assert units["read"]["phase"] == "Pending" and units["read"]["job"] == ""
        assert "waiting for the first listing of dataset slow" in units["read"]["reason"]
        lost = units["lost"]["reason"]
        assert lost.startswith("steps.lost.datasets[0]: user ") and "no dataset 'nope'" in lost
        assert "fix: create it" in lost and "phalanx get datasets" in lost
        assert api.get("/api/v1/datasets/slow")["phase"] == "Listing"
    finally:
        gate.set()  # the listing lands: the step starts and reads it
    view = ended(api, run_id)
    assert view["phase"] == "Failed"  # lost failed
    read = steps(view)["read"]
    assert read["phase"] == "Succeeded" and read["attempt"] == 2, read  # the first failed
    assert Path(read["outputs"]["text"]).read_text() == "alpha"
    digest = api.get("/api/v1/datasets/slow")["digest"]
    assert pinned(api, read["job"]) == [f"slow@{digest}"]
    annotations = api.job(read["job"])["document"]["metadata"]["annotations"]
    assert annotations == {KEYED: f"slow@{digest}"}  # carried over from the first attempt
    (entry,) = [e for e in api.get("/api/v1/cache") if e["step"] == "read"]
    assert entry["material"]["datasets"] == {"slow": digest} and entry["run_id"] == run_id
