"""Cache keys change exactly when what the step computes may change."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.spec.loader import build_pipeline
from phalanx.spec.pipeline.dag import Graph, build_graph
from phalanx.spec.pipeline.templates import Context
from phalanx.workflow.cache import (
    CacheEntry,
    KeyMaterial,
    artifact_references,
    key_material,
    servable,
)

TRAIN: dict[str, Any] = {
    "command": ["sh", "-c", "python train.py --lr {{params.lr}} {{inputs.data}} {{outputs.model}}"],
    "env": {"A": "1", "B": "{{params.seed}}", "RUN": "{{run.id}}"},
    "inputs": {"artifacts": {"data": "{{steps.prep.outputs.data}}"}},
    "outputs": {"artifacts": ["model"]},
    "cache": {"enabled": True, "files": ["train.py"], "excludeParams": ["seed"]},
}


def graph(train: dict[str, Any] | None = None, image: str = "localhost/t:1") -> Graph:
    document = {
        "apiVersion": "phalanx/v1",
        "kind": "Pipeline",
        "metadata": {"name": "p"},
        "spec": {
            "params": {"lr": 0.01, "seed": 1, "unused": "x"},
            "defaults": {"resources": {"cpu": 1}, "image": image},
            "steps": {
                "prep": {
                    "command": ["prep", "{{outputs.data}}"],
                    "outputs": {"artifacts": ["data"]},
                },
                "train": train or TRAIN,
            },
        },
    }
    return build_graph(build_pipeline(document).spec)


def key(
    g: Graph | None = None,
    *,
    params: dict[str, Any] | None = None,
    run: str = "r1",
    data: str = "sha256:aa",
    script: str = "sha256:bb",
) -> str:
    g = g or graph()
    node = g.steps["train"]
    context = Context(
        step="train",
        params={"lr": 0.01, "seed": 1, "unused": "x", **(params or {})},
        inputs={"data": f"/ws/{run}/prep/data"},
        outputs={"model": f"/ws/{run}/train/model"},
        steps={"prep": {"data": f"/ws/{run}/prep/data"}},
        run_id=run,
    )
    assert artifact_references(g, node) == ("inputs.data",)
    material = key_material(
        g, node, context, content={"inputs.data": data}, files={"train.py": script}
    )
    return material.key()


def test_the_key_ignores_run_specific_paths_and_ids() -> None:
    assert key(run="r1") == key(run="r2")
    assert len(key()) == 64


def test_each_ingredient_changes_the_key() -> None:
    base = key()
    assert key(params={"lr": 0.02}) != base
    assert key(data="sha256:ab") != base  # input content
    assert key(script="sha256:bc") != base  # one byte of a listed file
    assert key(graph(image="localhost/t:2")) != base
    changed = {**TRAIN, "command": [*TRAIN["command"][:2], TRAIN["command"][2] + " --x"]}
    assert key(graph(changed)) != base
    versioned = {**TRAIN, "cache": {**TRAIN["cache"], "version": "2"}}
    assert key(graph(versioned)) != base


def test_unused_and_excluded_params_and_env_order_do_not() -> None:
    base = key()
    assert key(params={"unused": "y"}) == base
    assert key(params={"seed": 99}) == base  # excluded, though the env reads it
    reordered = {**TRAIN, "env": dict(reversed(list(TRAIN["env"].items())))}
    assert key(graph(reordered)) == base


def test_the_document_is_canonical_json() -> None:
    material = KeyMaterial(
        step="s", templates={"b": "2", "a": "1"}, image=None, job=None, params={"é": 1.5}
    )
    again = KeyMaterial(
        step="s", templates={"a": "1", "b": "2"}, image=None, job=None, params={"é": 1.5}
    )
    assert material.key() == again.key()
    assert material.document()["version"][0] == "phalanx-cache/3"


def test_entries_past_their_ttl_or_with_a_lost_artifact_are_misses() -> None:
    entry = CacheEntry(
        key="k", pipeline="p", step="s", run_id="r", created=100.0, artifacts={"m": "/ws/m"}
    )
    assert servable(entry, ttl=None, now=10**9, exists=lambda _: True)
    assert servable(entry, ttl=50, now=150, exists=lambda _: True)
    assert not servable(entry, ttl=50, now=151, exists=lambda _: True)
    assert not servable(entry, ttl=None, now=101, exists=lambda _: False)


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5))
def test_keys_do_not_depend_on_mapping_order(params: dict[str, Any]) -> None:
    forward = KeyMaterial(step="s", templates={}, image=None, job=None, params=params)
    backward = KeyMaterial(
        step="s", templates={}, image=None, job=None, params=dict(reversed(params.items()))
    )
    assert forward.key() == backward.key()


def test_a_job_steps_key_covers_its_roles_but_not_where_it_is_scheduled() -> None:
    from phalanx.spec.loader import load_pipelines
    from tests.unit.workflow.examples import FULL

    def dist_key(text: str) -> str:
        g = build_graph(load_pipelines(text)[0].spec)
        context = Context(step="dist", params={"threshold": 0.9, "tag": "v1"}, run_id="r")
        return key_material(g, g.steps["dist"], context, content={}, files={}).key()

    base = dist_key(FULL)
    assert (
        dist_key(
            FULL.replace(
                "        minAvailable: 2\n",
                "        minAvailable: 2\n        queue: other\n        priority: 5\n",
            )
        )
        == base
    )
    assert dist_key(FULL.replace('["torchrun", "--lr"', '["torchrun", "--lr2"')) != base
    assert (
        dist_key(
            FULL.replace(
                'replicas: 1\n          resources: {cpu: 1, memory: 1Gi}\n          command: "torchrun',
                'replicas: 2\n          resources: {cpu: 1, memory: 1Gi}\n          command: "torchrun',
            )
        )
        != base
    )


READER: dict[str, Any] = {
    "command": ["sh", "-c", "wc -l $PHALANX_DATA_CORPUS/* > {{outputs.counts}}"],
    "datasets": ["corpus", "labels"],
    "outputs": {"artifacts": ["counts"]},
    "cache": {"enabled": True},
}
CORPUS = "sha256:" + "c" * 64
LABELS = "sha256:" + "1" * 64


def reader_key(step: dict[str, Any] | None = None, **listings: str) -> str:
    g = graph(step or READER)
    context = Context(step="train", params={}, outputs={"counts": "/ws/r/train/counts"})
    datasets = {"corpus": CORPUS, "labels": LABELS, **listings}
    return key_material(g, g.steps["train"], context, content={}, files={}, datasets=datasets).key()


def test_a_datasets_listing_is_in_the_key() -> None:
    base = reader_key()
    assert reader_key(corpus="sha256:" + "d" * 64) != base  # new data, listed again
    assert reader_key(labels="sha256:" + "2" * 64) != base
    assert reader_key(unread="sha256:" + "e" * 64) == base  # a dataset it does not read
    g = graph(READER)
    material = key_material(
        g,
        g.steps["train"],
        Context(step="train", params={}, outputs={"counts": "/ws/r/train/counts"}),
        content={},
        files={},
        datasets={"corpus": CORPUS, "labels": LABELS},
    )
    assert material.document()["datasets"] == {"corpus": CORPUS, "labels": LABELS}


def test_the_order_of_datasets_does_not_change_the_key() -> None:
    swapped = {**READER, "datasets": ["labels", "corpus"]}
    assert reader_key(swapped) == reader_key()
    forward = KeyMaterial(
        step="s", templates={}, image=None, job=None, params={}, datasets={"a": "1", "b": "2"}
    )
    backward = KeyMaterial(
        step="s", templates={}, image=None, job=None, params={}, datasets={"b": "2", "a": "1"}
    )
    assert forward.key() == backward.key()


def test_naming_another_dataset_changes_the_key_and_every_one_must_be_pinned() -> None:
    assert reader_key({**READER, "datasets": ["corpus"]}) != reader_key()
    g = graph(READER)
    context = Context(step="train", params={}, outputs={"counts": "/ws/r/train/counts"})
    with pytest.raises(KeyError):  # a caller that pinned one of two: a bug, not a key
        key_material(
            g, g.steps["train"], context, content={}, files={}, datasets={"corpus": CORPUS}
        )
