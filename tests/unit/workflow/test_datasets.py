"""Datasets as steps' inputs: named in the document, pinned when a unit starts (the same
listing for its key and its job), waited for or refused with the field and the fix, and
a job that read other listings than its key names is caught."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.spec.loader import build_pipeline
from phalanx.spec.pipeline.dag import Graph, build_graph
from phalanx.spec.pipeline.templates import Context
from phalanx.workflow.datasets import (
    KEYED,
    Listing,
    dataset_fields,
    disagreement,
    keyed,
    keyed_by,
    pins,
)
from phalanx.workflow.jobs import job_spec

CORPUS = "sha256:" + "c" * 64
LABELS = "sha256:" + "1" * 64
DIST: dict[str, Any] = {
    "job": {
        "roles": [
            {"name": "master", "replicas": 1, "resources": {"cpu": 1}, "command": "true",
             "datasets": ["corpus"]},
            {"name": "worker", "replicas": 2, "resources": {"cpu": 1}, "command": "true",
             "datasets": ["labels", "corpus"]},
        ]
    }
}  # fmt: skip


def document(steps: dict[str, Any], components: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Pipeline",
        "metadata": {"name": "p"},
        "spec": {
            "defaults": {"queue": "wf", "resources": {"cpu": 1}},
            "components": components or {},
            "steps": steps,
        },
    }


def graph(steps: dict[str, Any], components: dict[str, Any] | None = None) -> Graph:
    return build_graph(build_pipeline(document(steps, components)).spec)


def refusal(steps: dict[str, Any], components: dict[str, Any] | None = None) -> str:
    with pytest.raises(DocumentError) as info:
        build_pipeline(document(steps, components))
    return str(info.value)


def test_a_step_names_datasets_and_a_job_steps_roles_count_too() -> None:
    g = graph(
        {
            "count": {"command": "true", "datasets": ["corpus", "labels"]},
            "dist": DIST,
            "reuse": {"uses": "reader"},
            "plain": {"command": "true"},
        },
        components={"reader": {"command": "true", "datasets": ["labels"]}},
    )
    assert g.steps["count"].datasets == ("corpus", "labels")
    assert g.steps["dist"].datasets == ("corpus", "labels")  # each once, in role order
    assert g.steps["reuse"].datasets == ("labels",)
    assert g.steps["plain"].datasets == ()
    assert dataset_fields(g.steps["dist"]) == {
        "corpus": "steps.dist.job.roles[0].datasets[0]",
        "labels": "steps.dist.job.roles[1].datasets[0]",
    }
    assert dataset_fields(g.steps["count"]) == {
        "corpus": "steps.count.datasets[0]",
        "labels": "steps.count.datasets[1]",
    }


def test_bad_dataset_names_are_refused_naming_the_field_and_the_fix() -> None:
    pinned = refusal({"s": {"command": "true", "datasets": [f"corpus@{CORPUS}"]}})
    assert "spec.steps.s.datasets[0]: " in pinned, pinned
    assert "pinned to a listing" in pinned and "name the dataset alone" in pinned
    twice = refusal({"s": {"command": "true", "datasets": ["corpus", "corpus"]}})
    assert "named twice" in twice and "name each dataset once" in twice
    clash = refusal({"s": {"command": "true", "datasets": ["a-b", "a.b"]}})
    assert "$PHALANX_DATA_A_B" in clash
    bad = refusal({"s": {"command": "true", "datasets": ["Not_A_Name"]}})
    assert "is not a dataset name" in bad and "phalanx get datasets" in bad
    beside = refusal({"s": {**DIST, "datasets": ["corpus"]}})
    assert "datasets" in beside and "not allowed together with job" in beside
    role_pin = dict(DIST["job"]["roles"][0], datasets=[f"corpus@{CORPUS}"])
    in_role = refusal({"s": {"job": {"roles": [role_pin]}}})
    assert "job.roles" in in_role and "pinned to a listing" in in_role
    by_component = refusal({"s": {"uses": "dist", "datasets": ["corpus"]}}, {"dist": DIST})
    assert "spec.steps.s.datasets" in by_component and "component dist" in by_component
    sub = refusal({"s": {"pipeline": {"name": "other"}, "datasets": ["corpus"]}})
    assert "not allowed together with pipeline" in sub


def test_pins_wait_for_a_first_listing_and_refuse_what_is_not_there() -> None:
    node = graph({"count": {"command": "true", "datasets": ["corpus", "labels"]}}).steps["count"]
    listed = {"corpus": Listing(digest=CORPUS), "labels": Listing(digest=LABELS)}
    assert pins(node, listed, user="ann") == (
        {"corpus": CORPUS, "labels": LABELS},
        None,
    )
    # A relisting that failed: the last good listing is what is read.
    failed_again = {**listed, "labels": Listing(digest=LABELS, failure="403")}
    assert pins(node, failed_again, user="ann")[0]["labels"] == LABELS
    # Never listed yet: the unit waits, saying which.
    pinned, waiting = pins(node, {**listed, "labels": Listing(digest=None)}, user="a")
    assert pinned == {"corpus": CORPUS} and waiting is not None
    assert waiting.names == ("labels",) and "first listing of dataset labels" in waiting.reason
    # Not there: the field, the user and the fix.
    with pytest.raises(InvalidInput) as missing:
        pins(node, {**listed, "labels": None}, user="ann")
    assert missing.value.field == "steps.count.datasets[1]"
    assert "user ann has no dataset 'labels'" in str(missing.value)
    assert "phalanx get datasets" in str(missing.value)
    # Its only listing failed: the reason and how to list it again.
    never = {**listed, "corpus": Listing(digest=None, failure="NoSuchBucket")}
    with pytest.raises(InvalidInput) as broken:
        pins(node, never, user="ann")
    assert broken.value.field == "steps.count.datasets[0]" and "NoSuchBucket" in str(broken.value)
    assert "phalanx dataset refresh corpus" in str(broken.value)


def test_the_job_of_a_step_carries_its_datasets_pinned() -> None:
    g = graph({"count": {"command": "true", "datasets": ["corpus", "labels"]}, "dist": DIST})
    context = Context(step="count", run_id="r")
    pinned = {"corpus": CORPUS, "labels": LABELS}
    [main] = job_spec(g.steps["count"], context, datasets=pinned).roles
    assert main.datasets == [f"corpus@{CORPUS}", f"labels@{LABELS}"]
    [unpinned] = job_spec(g.steps["count"], context).roles  # a retry's dataset not yet listed
    assert unpinned.datasets == ["corpus", "labels"]
    master, worker = job_spec(g.steps["dist"], context, datasets=pinned).roles
    assert master.datasets == [f"corpus@{CORPUS}"]
    assert worker.datasets == [f"labels@{LABELS}", f"corpus@{CORPUS}"]
    assert job_spec(g.steps["dist"], context, datasets=pinned).to_job("j", 0.0).roles[
        1
    ].datasets == (("labels", LABELS), ("corpus", CORPUS))


def stored(pinned: dict[str, str], key: dict[str, str] | None) -> dict[str, Any]:
    """A job document as the store holds it: its roles as pinned when it ran."""
    metadata: dict[str, Any] = {"name": "j"}
    if key is not None:
        metadata["annotations"] = {KEYED: keyed(key)}
    datasets = [f"{name}@{digest}" if digest else name for name, digest in pinned.items()]
    return {"metadata": metadata, "spec": {"roles": [{"name": "main", "datasets": datasets}]}}


def test_a_job_that_read_other_listings_than_its_key_names_is_caught() -> None:
    node = graph({"count": {"command": "true", "datasets": ["corpus", "labels"]}}).steps["count"]
    key = {"corpus": CORPUS, "labels": LABELS}
    assert keyed(key) == f"corpus@{CORPUS},labels@{LABELS}"
    assert keyed_by(stored(key, dict(reversed(key.items())))) == keyed(key)
    assert keyed_by(stored(key, None)) is None
    assert disagreement(node, stored(key, key)) is None
    relisted = {**key, "labels": "sha256:" + "2" * 64}
    said = disagreement(node, stored(relisted, key))
    assert said is not None and "dataset labels at sha256:2222" in said and LABELS in said
    assert disagreement(node, stored(key, None)) is not None  # what its key read is unknown
    unpinned = disagreement(node, stored({**key, "corpus": ""}, key))
    assert unpinned is not None and "no pinned listing" in unpinned
    plain = graph({"plain": {"command": "true"}}).steps["plain"]
    assert disagreement(plain, stored({}, None)) is None
