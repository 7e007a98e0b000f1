"""The workflow controller's use of the step cache: key material with the hashes of
what a step reads, and entries written, served and missed (on a real SQLite store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.control.controllers.caching import lookup, material_of, store
from phalanx.control.store.database import Database
from phalanx.spec.loader import load_pipelines
from phalanx.spec.pipeline import Graph, build_graph
from phalanx.spec.pipeline.templates import Context
from phalanx.workflow.contents import SERVER, MissingContent, content_hash

PIPE = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: p}
spec:
  params: {lr: 0.01}
  defaults: {queue: q, resources: {cpu: 1}}
  steps:
    prep: {command: "echo > {{outputs.data}}", outputs: {artifacts: [data]}}
    train:
      inputs: {artifacts: {data: "{{steps.prep.outputs.data}}"}}
      command: "sh SCRIPT {{inputs.data}} {{params.lr}} > {{outputs.model}}"
      cache: {enabled: true, ttl: 60, files: [SCRIPT]}
      outputs: {artifacts: [model]}
"""


def graph(script: Path) -> Graph:
    return build_graph(load_pipelines(PIPE.replace("SCRIPT", str(script)))[0].spec)


def context(data: Path, run: str = "r1") -> Context:
    return Context(
        step="train",
        params={"lr": 0.01},
        inputs={"data": str(data)},
        outputs={"model": f"/w/runs/{run}/train/model"},
        steps={"prep": {"data": str(data)}},
        run_id=run,
    )


def hashed(url: str) -> str:
    """What ``Hashes.batch`` hands the controller: the content hash as the server reads."""
    return content_hash(url, SERVER)


def test_the_key_follows_the_content_of_inputs_and_listed_files(tmp_path: Path) -> None:
    script, data = tmp_path / "train.sh", tmp_path / "data"
    script.write_text("cat $1\n")
    data.write_text("hello\n")
    g = graph(script)
    node = g.node("train")
    base = material_of(g, node, context(data), user="ann", hash_of=hashed).key()
    assert (
        material_of(g, node, context(data, run="r2"), user="ann", hash_of=hashed).key() == base
    )  # run id: no
    script.write_text("cat $1 \n")
    changed_file = material_of(g, node, context(data), user="ann", hash_of=hashed).key()
    assert changed_file != base
    data.write_text("hellO\n")
    assert material_of(g, node, context(data), user="ann", hash_of=hashed).key() not in (
        base,
        changed_file,
    )
    other = material_of(g, node, context(data), user="bob", hash_of=hashed)
    assert other.key() != material_of(g, node, context(data), user="ann", hash_of=hashed).key()
    data.unlink()
    with pytest.raises(MissingContent):
        material_of(g, node, context(data), user="ann", hash_of=hashed)


def test_an_entry_is_served_until_its_ttl_or_an_artifact_is_gone(tmp_path: Path) -> None:
    db = Database.open(f"sqlite:///{tmp_path / 'db.sqlite'}")  # migrated to head (0008)
    script, model = tmp_path / "train.sh", tmp_path / "model"
    script.write_text("true\n")
    model.write_text("m\n")
    node = graph(script).node("train")
    with db.write() as session:
        store(
            session,
            key="k" * 64,
            material={"step": "train"},
            pipeline="p",
            node=node,
            unit="train",
            run_id="r1",
            user="ann",
            outputs={"model": str(model)},
            now=100.0,
            hash_of=hashed,
        )
    with db.session() as session:
        found = lookup(session, "k" * 64, user="ann", ttl=60, now=150.0, access=SERVER)
        assert found is not None and found.outputs == {"model": str(model)}
        assert found.artifacts["model"]["hash"].startswith("sha256:")
        assert found.expires_at == 160.0 and found.run_id == "r1"
        assert (
            lookup(session, "k" * 64, user="ann", ttl=60, now=161.0, access=SERVER) is None
        )  # past its ttl
        assert (
            lookup(session, "x" * 64, user="ann", ttl=None, now=150.0, access=SERVER) is None
        )  # no entry
        assert (
            lookup(session, "k" * 64, user="bob", ttl=None, now=150.0, access=SERVER) is None
        )  # ann's
        model.unlink()
        assert (
            lookup(session, "k" * 64, user="ann", ttl=None, now=150.0, access=SERVER) is None
        )  # a miss, no error
