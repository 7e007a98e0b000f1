"""A hundred malformed submissions: each gets a 4xx whose message names the field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.control.serving import Api, running_server

VALID: dict[str, Any] = {
    "apiVersion": "phalanx/v1",
    "kind": "Job",
    "metadata": {"name": "ok"},
    "spec": {
        "queue": "team-a",
        "roles": [
            {
                "name": "worker",
                "replicas": 2,
                "resources": {"cpu": 1, "memory": "1Gi", "gpu": 1},
                "command": "true",
            }
        ],
    },
}


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = document
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value

    return change


_DELETE = object()
_ROLE = "spec.roles.0"

# (what is wrong, the change, a fragment the answer must name)
CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("no apiVersion", _set("apiVersion", _DELETE), "apiVersion"),
    ("no kind", _set("kind", _DELETE), "kind"),
    ("unknown kind", _set("kind", "Jobb"), "kind"),
    ("wrong apiVersion", _set("apiVersion", "v2"), "apiVersion"),
    ("no metadata", _set("metadata", _DELETE), "metadata"),
    ("no name", _set("metadata.name", _DELETE), "metadata.name"),
    ("no spec", _set("spec", _DELETE), "spec"),
    ("no roles", _set("spec.roles", _DELETE), "spec.roles"),
    ("empty roles", _set("spec.roles", []), "spec.roles"),
    ("roles not a list", _set("spec.roles", {"a": 1}), "spec.roles"),
    ("unknown top field", _set("status", {}), "status"),
    ("unknown spec field", _set("spec.queues", "x"), "spec.queues"),
    ("unknown role field", _set(f"{_ROLE}.replica", 2), "replica"),
    ("unknown queue", _set("spec.queue", "nowhere"), "spec.queue"),
    ("parent queue", _set("spec.queue", "parent"), "spec.queue"),
    ("no command", _set(f"{_ROLE}.command", _DELETE), "command"),
    ("empty command string", _set(f"{_ROLE}.command", "   "), "command"),
    ("command of numbers", _set(f"{_ROLE}.command", [1, 2]), "command"),
    ("nul in command", _set(f"{_ROLE}.command", ["a\x00b"]), "command"),
    ("zero replicas", _set(f"{_ROLE}.replicas", 0), "replicas"),
    ("negative replicas", _set(f"{_ROLE}.replicas", -1), "replicas"),
    ("replicas as text", _set(f"{_ROLE}.replicas", "two"), "replicas"),
    ("huge replicas", _set(f"{_ROLE}.replicas", 10**12), "replicas"),
    ("replicas as float", _set(f"{_ROLE}.replicas", 1.5), "replicas"),
    # past the limits of phalanx.spec.limits (each was stored before they existed)
    ("100,000 replicas", _set(f"{_ROLE}.replicas", 100_000), "replicas"),
    (
        "10,000 roles",
        _set(
            "spec.roles",
            [{**VALID["spec"]["roles"][0], "name": f"r{i}", "replicas": 1} for i in range(10_000)],
        ),
        "spec.roles",
    ),
    ("priority 2**70", _set("spec.priority", 2**70), "spec.priority"),
    ("maxRetry 2**64", _set("spec.maxRetry", 2**64), "spec.maxRetry"),
    ("walltime 99999999999999h", _set("spec.walltime", "99999999999999h"), "spec.walltime"),
    ("env value of 1 MiB", _set(f"{_ROLE}.env", {"BIG": "x" * 2**20}), "env.BIG"),
    ("no resources", _set(f"{_ROLE}.resources", _DELETE), "resources"),
    ("gpu as text", _set(f"{_ROLE}.resources.gpu", "two"), "resources.gpu"),
    ("gpu 1.5", _set(f"{_ROLE}.resources.gpu", 1.5), "resources.gpu"),
    ("negative gpu", _set(f"{_ROLE}.resources.gpu", -1), "resources.gpu"),
    ("memory in GB typo", _set(f"{_ROLE}.resources.memory", "16GBs"), "resources.memory"),
    ("cpu as list", _set(f"{_ROLE}.resources.cpu", [1]), "resources.cpu"),
    ("bad resource name", _set(f"{_ROLE}.resources.Bad Name!", 1), "resources"),
    ("role name upper", _set(f"{_ROLE}.name", "Worker"), "name"),
    ("role name empty", _set(f"{_ROLE}.name", ""), "name"),
    ("role name too long", _set(f"{_ROLE}.name", "a" * 64), "name"),
    ("job name upper", _set("metadata.name", "Bad"), "metadata.name"),
    ("job name with slash", _set("metadata.name", "a/b"), "metadata.name"),
    ("job name with nul", _set("metadata.name", "a\x00b"), "metadata.name"),
    ("job name huge", _set("metadata.name", "a" * 300), "metadata.name"),
    ("job name emoji", _set("metadata.name", "job-\U0001f680"), "metadata.name"),
    ("job name as number", _set("metadata.name", 7), "metadata.name"),
    ("priority as text", _set("spec.priority", "high"), "spec.priority"),
    ("minAvailable zero", _set("spec.minAvailable", 0), "spec.minAvailable"),
    ("minAvailable above replicas", _set("spec.minAvailable", 5), "minAvailable"),
    ("maxRetry negative", _set("spec.maxRetry", -1), "spec.maxRetry"),
    ("walltime bad", _set("spec.walltime", "8 hours"), "spec.walltime"),
    ("walltime negative", _set("spec.walltime", -5), "spec.walltime"),
    ("runtimeEstimate bad", _set("spec.runtimeEstimate", "soon"), "spec.runtimeEstimate"),
    ("preemptible as text", _set("spec.preemptible", "maybe"), "spec.preemptible"),
    ("serviceClass unknown", _set("spec.serviceClass", "batch"), "spec.serviceClass"),
    ("user with spaces", _set("spec.user", "a b"), "spec.user"),
    ("queue name bad", _set("spec.queue", "Team A"), "spec.queue"),
    ("node selector value bad", _set("spec.nodeSelector", {"a": "b c"}), "nodeSelector"),
    ("node selector key bad", _set("spec.nodeSelector", {"a b": "c"}), "nodeSelector"),
    ("toleration not a mapping", _set("spec.tolerations", ["x"]), "spec.tolerations"),
    (
        "toleration bad effect",
        _set("spec.tolerations", [{"key": "a", "effect": "Sometimes"}]),
        "effect",
    ),
    (
        "affinity bad operator",
        _set("spec.affinity", [{"key": "a", "operator": "Near"}]),
        "operator",
    ),
    ("env bad name", _set(f"{_ROLE}.env", {"1BAD": "x"}), "env"),
    ("env value not text", _set(f"{_ROLE}.env", {"A": {"b": 1}}), "env"),
    ("env value with nul", _set(f"{_ROLE}.env", {"A": "x\x00"}), "env"),
    ("dependsOn unknown role", _set(f"{_ROLE}.dependsOn", [{"role": "master"}]), "dependsOn"),
    ("dependsOn itself", _set(f"{_ROLE}.dependsOn", [{"role": "worker"}]), "dependsOn"),
    (
        "dependsOn bad phase",
        _set(f"{_ROLE}.dependsOn", [{"role": "worker", "phase": "Done"}]),
        "phase",
    ),
    ("network tier bad", _set("spec.networkTopology", {"tier": "TOR"}), "networkTopology"),
    (
        "network mode bad",
        _set("spec.networkTopology", {"tier": "tor", "mode": "firm"}),
        "networkTopology",
    ),
    (
        "network group zero",
        _set("spec.networkTopology", {"tier": "tor", "groupSize": 0}),
        "groupSize",
    ),
    ("labels not mapping", _set("metadata.labels", ["a"]), "metadata.labels"),
    ("spec is a list", _set("spec", []), "spec"),
    ("metadata is text", _set("metadata", "ok"), "metadata"),
    ("resources is text", _set(f"{_ROLE}.resources", "lots"), "resources"),
    ("role is text", _set(_ROLE, "worker"), "spec.roles[0]"),
    (
        "duplicate role names",
        lambda d: d["spec"]["roles"].append(copy.deepcopy(d["spec"]["roles"][0])),
        "roles",
    ),
    ("cpu absurd", _set(f"{_ROLE}.resources.cpu", "1e400"), "resources.cpu"),
    ("memory negative", _set(f"{_ROLE}.resources.memory", "-1Gi"), "resources.memory"),
    ("gpu nan", _set(f"{_ROLE}.resources.gpu", "NaN"), "resources.gpu"),
    ("hostile name control chars", _set("metadata.name", "\x1b[31mred"), "metadata.name"),
    ("starvationThreshold bad", _set("spec.starvationThreshold", "forever"), "starvationThreshold"),
    ("priority float", _set("spec.priority", 1.5), "spec.priority"),
    ("replicas null", _set(f"{_ROLE}.replicas", None), "replicas"),
    ("queue null", _set("spec.queue", None), "spec.queue"),
    ("command null", _set(f"{_ROLE}.command", None), "command"),
    ("name null", _set("metadata.name", None), "metadata.name"),
    ("kind null", _set("kind", None), "kind"),
    ("annotations not text", _set("metadata.annotations", {"a": 1}), "metadata.annotations"),
    ("nodeSelector in role bad", _set(f"{_ROLE}.nodeSelector", {"k": ["v"]}), "nodeSelector"),
    ("tolerations in role bad", _set(f"{_ROLE}.tolerations", "all"), "tolerations"),
    ("affinity in role bad", _set(f"{_ROLE}.affinity", {"key": "a"}), "affinity"),
    ("gpu-memory without gpu bad", _set(f"{_ROLE}.resources.gpu-memory", "lots"), "gpu-memory"),
    (
        "volcano job without tasks",
        lambda d: d.update(apiVersion="batch.volcano.sh/v1alpha1", spec={"queue": "team-a"}),
        "tasks",
    ),
    (
        "volcano queue to jobs endpoint",
        lambda d: d.update(apiVersion="scheduling.volcano.sh/v1beta1", kind="Queue", spec={}),
        "kind",
    ),
    ("queue document to jobs endpoint", lambda d: d.update(kind="Queue", spec={}), "kind"),
    (
        "openpai without taskRoles",
        lambda d: (d.clear(), d.update(protocolVersion=2, name="pai", type="job")),
        "taskRoles",
    ),
    (
        "openpai negative instances",
        lambda d: (
            d.clear(),
            d.update(
                protocolVersion=2,
                name="pai",
                type="job",
                prerequisites=[{"name": "img", "type": "dockerimage", "uri": "x"}],
                taskRoles={
                    "w": {
                        "instances": -1,
                        "dockerImage": "img",
                        "resourcePerInstance": {"cpu": 1, "memoryMB": 1024, "gpu": 0},
                        "commands": ["true"],
                    }
                },
            ),
        ),
        "instances",
    ),
    (
        "openpai wrong version",
        lambda d: (d.clear(), d.update(protocolVersion=3, name="pai", type="job")),
        "protocolVersion",
    ),
]


def _bodies() -> list[tuple[str, Any, str]]:
    cases = []
    for what, change, field in CASES:
        document = copy.deepcopy(VALID)
        change(document)
        cases.append((what, document, field))
    # non-mapping bodies
    cases += [
        ("a list body", [VALID], "body"),
        ("a number body", 7, "body"),
        ("a string body", "job", "body"),
        ("null body", None, "body"),
    ]
    return cases


BODIES = _bodies()


def test_there_are_a_hundred_cases() -> None:
    assert len(BODIES) >= 100 - 3  # three more below: raw JSON that does not parse


@pytest.fixture(scope="module")
def api(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with running_server(tmp_path_factory.mktemp("bad")) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        api.queue("parent")
        api.queue("child", parent="parent")
        yield api


@pytest.mark.parametrize(("what", "body", "field"), BODIES, ids=[b[0] for b in BODIES])
def test_a_malformed_job_is_refused_naming_the_field(
    api: Api, what: str, body: Any, field: str
) -> None:
    response = api.http.post("/api/v1/jobs", json=body)
    assert 400 <= response.status_code < 500, (what, response.status_code, response.text)
    answer = response.json()
    text = f"{answer.get('field', '')} {answer['detail']}"
    assert field in text, (what, answer)
    assert answer.get("fix"), (what, answer)
    assert "Traceback" not in response.text


@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe", b'{"apiVersion": "phalanx/v1", "kind": '])
def test_a_body_that_is_not_json_is_refused(api: Api, raw: bytes) -> None:
    response = api.http.post(
        "/api/v1/jobs", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["field"].startswith("body")


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/v1/jobs", {"queue": "team\x00a"}, "queue"),
        ("/api/v1/jobs", {"user": "\x00"}, "user"),
        ("/api/v1/jobs/a%00b", {}, "name"),
        ("/api/v1/queues/q%00", {}, "name"),
    ],
)
def test_a_nul_byte_in_a_parameter_is_refused_naming_it(
    api: Api, path: str, params: dict[str, str], field: str
) -> None:
    response = api.http.get(path, params=params)  # PostgreSQL would refuse it: a 500
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field and response.json()["fix"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"weight": 1e308}, "spec.weight"), ({"priority": 2**70}, "spec.priority")],
)
def test_a_queue_past_a_limit_is_refused_naming_the_field(
    api: Api, spec: dict[str, Any], field: str
) -> None:
    document = {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "absurd"}}
    answer = api.post("/api/v1/queues", {**document, "spec": spec}, expect=422)
    assert answer["field"] == field and answer["fix"]
    assert api.get("/api/v1/queues/absurd", expect=404)


def test_nothing_malformed_was_stored(api: Api) -> None:
    assert api.get("/api/v1/jobs")["items"] == []
