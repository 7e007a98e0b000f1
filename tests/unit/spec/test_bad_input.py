"""Bad input of every sort is refused with one DocumentError naming where, what and the fix."""

from __future__ import annotations

import contextlib
import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import DocumentError
from phalanx.spec import MAX_INPUT_SIZE, load_documents
from tests.unit.spec.examples import DESIGN_EXAMPLES, MINIMAL_JOB, VOLCANO_JOB

QUEUE, JOB, CLUSTER, CONFIG = DESIGN_EXAMPLES.split("---\n")


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def with_spec(document: str, line: str) -> str:
    return edit(document, "spec:\n", f"spec:\n  {line}\n")


ROLE = "- name: master\n    replicas: 1\n"
GROUP = "count: 32\n"

CASES = [
    # unknown fields, with the closest allowed one
    (
        edit(MINIMAL_JOB, "replicas: 1", "replica: 1"),
        "spec.roles[0].replica: unknown field; fix: did you mean 'replicas'?",
    ),
    (with_spec(QUEUE, "wieght: 2"), "spec.wieght: unknown field; fix: did you mean 'weight'?"),
    (
        edit(MINIMAL_JOB, "metadata: {name: bert}", "metadata: {name: bert, namespace: x}"),
        "metadata.namespace: unknown field",
    ),
    (
        with_spec(QUEUE, "x" * 100 + ": 1"),
        f"spec[{'x' * 60!r}]: unknown field",
    ),
    (
        MINIMAL_JOB + "status: {}\n",
        "status: unknown field; fix: allowed: apiVersion, kind, metadata, spec",
    ),
    # numbers out of range or of the wrong type
    (edit(MINIMAL_JOB, "replicas: 1", "replicas: -2"), "spec.roles[0].replicas: must be >= 1"),
    (
        edit(MINIMAL_JOB, "replicas: 1", "replicas: '1'"),
        "spec.roles[0].replicas: expected an integer",
    ),
    (
        edit(MINIMAL_JOB, "replicas: 1", "replicas: 1.0"),
        "spec.roles[0].replicas: expected an integer",
    ),
    (
        edit(MINIMAL_JOB, "replicas: 1", "replicas: 10001"),
        "spec.roles[0].replicas: must be <= 10000",
    ),
    (
        MINIMAL_JOB.replace("replicas: 1", "replicas: 6000")
        + "  - {name: worker, replicas: 6000, resources: {}}\n",
        "spec.roles: 12000 replicas in all is more than the limit of 10000 per job",
    ),
    (
        with_spec(MINIMAL_JOB, "minAvailable: 2"),
        "spec.minAvailable: 2 is more than the job's 1 replicas",
    ),
    (with_spec(MINIMAL_JOB, "minAvailable: 0"), "spec.minAvailable: must be >= 1"),
    (with_spec(MINIMAL_JOB, "maxRetry: -1"), "spec.maxRetry: must be >= 0"),
    (with_spec(MINIMAL_JOB, "preemptible: maybe"), "spec.preemptible: expected true or false"),
    (with_spec(QUEUE, "priority: high"), "spec.priority: expected an integer"),
    (edit(QUEUE, "weight: 2", "weight: 0"), "spec.weight: must be >= 0.001"),
    (
        edit(QUEUE, "guarantee: {gpu: 16}", "guarantee: {gpu: 128}"),
        "spec.guarantee.gpu: 128 exceeds capability 64",
    ),
    (edit(QUEUE, "parent: team-a", "parent: nlp"), "spec.parent: a queue cannot be its own parent"),
    # quantities and durations
    (edit(MINIMAL_JOB, "32Gi", "16GB"), "spec.roles[0].resources.memory: '16GB' is not a quantity"),
    (edit(MINIMAL_JOB, "cpu: 8", "cpu: -8"), "spec.roles[0].resources.cpu: -8 is negative"),
    (
        edit(MINIMAL_JOB, "cpu: 8", "nvidia.com/gpu: [1]"),
        "spec.roles[0].resources['nvidia.com/gpu']: expected a quantity",
    ),
    (
        edit(MINIMAL_JOB, "cpu: 8", "'gpu!': 1"),
        "spec.roles[0].resources['gpu!'] (the key): 'gpu!' is not a resource name",
    ),
    (
        edit(MINIMAL_JOB, "    resources: {cpu: 8, memory: 32Gi}\n", ""),
        "spec.roles[0].resources: is required",
    ),
    (with_spec(MINIMAL_JOB, "walltime: 8 hours"), "spec.walltime: '8 hours' is not a duration"),
    (
        edit(MINIMAL_JOB, "cpu: 8", "gpu: 1.5"),
        "spec.roles[0].resources.gpu: 1.5 GPUs: a task takes a share of one GPU",
    ),
    (
        with_spec(MINIMAL_JOB, "serviceClass: batch"),
        "spec.serviceClass: 'batch' is not allowed; fix: use one of 'online' or 'offline'",
    ),
    # roles and their dependencies
    (
        edit(MINIMAL_JOB, "roles:\n", "roles: []\n").split("  - name")[0],
        "spec.roles: must not be empty",
    ),
    (
        MINIMAL_JOB + "  - {name: master, replicas: 1, resources: {}}\n",
        "spec.roles[1].name: role name 'master' is used twice",
    ),
    (
        edit(MINIMAL_JOB, "name: master", "name: Master_1"),
        "spec.roles[0].name: 'Master_1' is not a valid name (DNS-1123 label)",
    ),
    (
        edit(JOB, "{role: master, phase: Running}", "{role: chief}"),
        "spec.roles[1].dependsOn[0].role: 'chief' is not a role of this job; fix: name one of the other roles (master)",
    ),
    (
        edit(JOB, "{role: master, phase: Running}", "{role: master, phase: Succeeded}"),
        "spec.roles[1].dependsOn[0].phase: 'Succeeded' is not allowed; fix: use one of 'Running'",
    ),
    (
        edit(JOB, "replicas: 1\n", "replicas: 1\n    dependsOn: [{role: worker}]\n"),
        "spec.roles[0].dependsOn: roles depend on each other in a cycle: master -> worker -> master",
    ),
    (
        edit(MINIMAL_JOB, ROLE, ROLE + "    tolerations: [{key: a, operator: Exists, value: b}]\n"),
        "spec.roles[0].tolerations[0].value: a toleration with operator Exists takes no value",
    ),
    (
        edit(MINIMAL_JOB, ROLE, ROLE + "    affinity: [{key: zone, operator: In}]\n"),
        "spec.roles[0].affinity[0].values: operator In needs values",
    ),
    (
        edit(
            MINIMAL_JOB, ROLE, ROLE + "    affinity: [{key: zone, operator: Near, values: [a]}]\n"
        ),
        "spec.roles[0].affinity[0].operator: 'Near' is not allowed",
    ),
    (
        edit(MINIMAL_JOB, ROLE, ROLE + "    command: '  '\n"),
        "spec.roles[0].command: the command is empty",
    ),
    # clusters
    (
        edit(
            CLUSTER,
            "  - name: dgx",
            "  - name: dgx\n    count: 1\n    resources: {}\n  - name: dgx",
        ),
        "spec.nodeGroups[1].name: node group 'dgx' is defined twice",
    ),
    (
        edit(CLUSTER, "tor-{index // 16}", "tor-{index.__class__}"),
        "spec.nodeGroups[0].network.tor: {index.__class__} uses 'index.__class__', which is not allowed",
    ),
    (
        edit(CLUSTER, "tor-{index // 16}", "tor-{index // (index - 5)}"),
        "spec.nodeGroups[0].network.tor: {index // (index - 5)} divides by zero for index 5",
    ),
    (
        edit(CLUSTER, GROUP, GROUP + '    address: "10.0.0.{index.real}"\n'),
        "spec.nodeGroups[0].address: {index.real} uses 'index.real', which is not allowed",
    ),
    (
        edit(CLUSTER, GROUP, GROUP + '    address: "10.0.0.{index + 240}"\n'),
        "spec.nodeGroups[0].address: node dgx-16: '10.0.0.256' is neither an IP address "
        "nor a host name; fix: give the address the node's peers reach it at",
    ),
    (
        edit(CLUSTER, GROUP, GROUP + '    address: "gpu_{index}.lab"\n'),
        "spec.nodeGroups[0].address: node dgx-0: 'gpu_0.lab' is neither an IP address",
    ),
    (edit(CLUSTER, GROUP, "count: 0\n"), "spec.nodeGroups[0].count: must be >= 1"),
    (edit(CLUSTER, GROUP, "count: 10000000\n"), "spec.nodeGroups[0].count: must be <= 100000"),
    (
        edit(CLUSTER, "rdma/hca: 8}", "rdma/hca: 8, gpu: 8}"),
        "spec.nodeGroups[0].resources.gpu: gpu is given by gpus",
    ),
    (
        edit(CLUSTER, "memory: 80Gi,", "memory: lots,"),
        "spec.nodeGroups[0].gpus.memory: 'lots' is not a quantity",
    ),
    # scheduler configs
    (
        edit(CONFIG, "[enqueue, allocate,", "[enqueue, enqueue,"),
        "spec.actions[1]: action 'enqueue' is listed twice",
    ),
    (
        edit(CONFIG, "[enqueue, allocate, reclaim, preempt, backfill]", "[]"),
        "spec.actions: must not be empty",
    ),
    (
        edit(CONFIG, "{name: drf}", "{name: gang}"),
        "spec.tiers[1].plugins[0].name: plugin 'gang' appears more than once",
    ),
    (
        edit(CONFIG, "{name: drf}", "{name: drf, disabled: [x]}"),
        "spec.tiers[1].plugins[0].disabled: unknown field; fix: did you mean 'disable'?",
    ),
    # names that are not names
    (
        edit(MINIMAL_JOB, "name: bert", 'name: "be\\x07rt"'),
        "metadata.name: 'be\\x07rt' is not a valid name (DNS-1123)",
    ),
    (
        edit(MINIMAL_JOB, "name: bert", "name: " + "a" * 254),
        "is not a valid name (DNS-1123); fix: use lowercase letters",
    ),
    (
        edit(QUEUE, "name: nlp", "name: root"),
        "metadata.name: 'root' is the implicit root of the queue tree",
    ),
    (
        with_spec(MINIMAL_JOB, 'user: "bob\\u202e"'),
        "spec.user: 'bob\\u202e' is not a valid user name",
    ),
    (
        edit(
            MINIMAL_JOB, "metadata: {name: bert}", "metadata: {name: bert, labels: {team: 'a b'}}"
        ),
        "metadata.labels.team: 'a b' is not a valid label value",
    ),
    # the document itself
    ("- 1\n- 2\n", "document 1: expected a mapping, got a list"),
    ("just text\n", "document 1: expected a mapping, got str"),
    ("kind: Job\nmetadata: {name: x}\n", "document 1 (Job x): apiVersion: is required"),
    (
        "apiVersion: phalanx/v1\nmetadata: {name: x}\n",
        "document 1 (x): kind: is required; fix: add kind, one of: phalanx/v1 Queue",
    ),
    (
        "apiVersion: phalanx/v1\nkind: Pod\n",
        "document 1 (Pod): kind: Pod of apiVersion phalanx/v1 is not a known kind; fix: use one of:",
    ),
    (
        "apiVersion: phalanx/v2\nkind: Job\n",
        "apiVersion: phalanx/v2 is not known; fix: for kind Job use apiVersion phalanx/v1 or batch.volcano.sh/v1alpha1",
    ),
    ("apiVersion: phalanx/v1\nkind: Queue\n", "document 1 (Queue): metadata: is required"),
    # YAML that phalanx refuses to read
    ("a: [1,\n", "document 1, line 2, column 1: expected the node content"),
    ("a: &x [1, 2]\nb: *x\n", "line 2, column 4: YAML aliases (*name) are not accepted"),
    ("a: 1\nb: 2\na: 3\n", "line 3, column 1: key 'a' appears twice in one mapping"),
    ("a: " + "[" * 100 + "]" * 100 + "\n", "nested more than 64 levels deep"),
    ("a: b\x07c\n", "line 1, column 5: character U+0007 is not allowed in YAML"),
    ("a: !!python/object/apply:os.system [true]\n", "could not determine a constructor"),
    ("a: 2024-13-45\n", "a value cannot be read: month must be in 1..12; fix: quote the value"),
]


@pytest.mark.parametrize(("text", "fragment"), CASES, ids=[c[1][:50] for c in CASES])
def test_bad_input_names_the_field_and_the_fix(text: str, fragment: str) -> None:
    with pytest.raises(DocumentError) as caught:
        load_documents(text, source="bad.yaml")
    message = str(caught.value)
    assert message.startswith(("bad.yaml document 1", "bad.yaml, line "))
    assert fragment in message
    assert "; fix: " in message


def test_the_error_names_the_document_number_kind_and_name() -> None:
    text = QUEUE + "---\n" + edit(JOB, "replicas: 2", "replicas: 0")
    with pytest.raises(DocumentError) as caught:
        load_documents(text, source="jobs.yaml")
    assert str(caught.value) == (
        "jobs.yaml document 2 (Job bert-pretrain): spec.roles[1].replicas: must be >= 1, got 0;"
        " fix: use a value >= 1"
    )
    assert caught.value.field == "spec.roles[1].replicas"
    assert caught.value.fix == "use a value >= 1"


def test_every_problem_of_a_document_is_listed() -> None:
    text = edit(edit(MINIMAL_JOB, "replicas: 1", "replicas: 0"), "cpu: 8", "cpu: lots")
    with pytest.raises(DocumentError) as caught:
        load_documents(text)
    lines = str(caught.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "spec.roles[0].replicas",
        "spec.roles[0].resources.cpu",
    ]


def test_huge_input_is_refused_before_parsing() -> None:
    text = "a: " + "x" * MAX_INPUT_SIZE
    with pytest.raises(DocumentError, match=r"over the 10485760 limit; fix: split it"):
        load_documents(text, source="big.yaml")


def test_an_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    with pytest.raises(DocumentError, match="YAML aliases"):
        load_documents("\n".join(lines))


def test_problems_beyond_ten_are_counted() -> None:
    roles = "".join(f"  - {{name: r{i}, replicas: 0, resources: {{}}}}\n" for i in range(12))
    text = MINIMAL_JOB.split("  - name")[0] + roles
    with pytest.raises(DocumentError) as caught:
        load_documents(text)
    assert str(caught.value).splitlines()[-1] == "... and 2 more problem(s)"


# Anything at all: valid documents, or a DocumentError, never another exception.
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
field_names = st.sampled_from(
    [
        "name",
        "replicas",
        "resources",
        "roles",
        "spec",
        "metadata",
        "command",
        "dependsOn",
        "role",
        "nodeGroups",
        "count",
        "network",
        "gpus",
        "actions",
        "tiers",
        "plugins",
        "tasks",
        "template",
    ]
)
near_documents = st.recursive(
    values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(field_names, inner, max_size=5),
    max_leaves=30,
)
templates = [yaml.safe_load(t) for t in (QUEUE, JOB, CLUSTER, CONFIG, VOLCANO_JOB)]


@settings(max_examples=300, deadline=None)
@given(template=st.sampled_from(templates), spec=near_documents)
def test_arbitrary_specs_give_documents_or_document_errors(
    template: dict[str, object], spec: object
) -> None:
    text = json.dumps({**template, "spec": spec}, allow_nan=True)
    with contextlib.suppress(DocumentError):
        load_documents(text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_arbitrary_text_gives_documents_or_document_errors(text: str) -> None:
    with contextlib.suppress(DocumentError):
        load_documents(text)
