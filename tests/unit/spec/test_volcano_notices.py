"""A Volcano vcjob or Queue field read but not honoured is a notice naming its path and
what phalanx does instead; a clean document has none, and notices change no import."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from phalanx.spec.diagnostics import Notice
from phalanx.spec.importers.volcano import import_volcano_job, import_volcano_queue
from tests.unit.spec.examples import VOLCANO_QUEUE

# Only fields phalanx maps: nothing to say.
CLEAN = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: mpi, labels: {team: hpc}}
spec:
  minAvailable: 3
  queue: hpc
  priorityClassName: high-100
  maxRetry: 2
  tasks:
  - name: launcher
    replicas: 1
    dependsOn: {name: [worker], iteration: all}
    template:
      spec:
        nodeSelector: {zone: a}
        tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
        containers:
        - name: mpi
          image: mpi:4
          command: [mpirun]
          args: [-np, "2", ./hello]
          resources: {requests: {cpu: "1", memory: 1Gi}}
  - name: worker
    replicas: 2
    template:
      spec:
        containers:
        - name: mpi
          image: mpi:4
          command: [sleep, infinity]
          resources: {limits: {nvidia.com/gpu: 1}}
status: {state: {phase: Running}}
"""

TASK = "spec.tasks[0]."
POD = TASK + "template.spec."
MAIN = POD + "containers[0]."

# Each field added to CLEAN, and the path its notice names.
FIELDS: dict[str, tuple[str, Any]] = {
    "metadata.namespace": ("metadata", {"namespace": "hpc"}),
    "spec.schedulerName": ("spec", {"schedulerName": "volcano"}),
    "spec.volumes": ("spec", {"volumes": [{"mountPath": "/data", "volumeClaimName": "d"}]}),
    "spec.policies": ("spec", {"policies": [{"event": "PodEvicted", "action": "RestartJob"}]}),
    "spec.plugins": ("spec", {"plugins": {"ssh": [], "svc": []}}),
    "spec.runningEstimate": ("spec", {"runningEstimate": "2h"}),
    "spec.ttlSecondsAfterFinished": ("spec", {"ttlSecondsAfterFinished": 60}),
    "spec.minSuccess": ("spec", {"minSuccess": 1}),
    "spec.networkTopology": ("spec", {"networkTopology": {"mode": "hard"}}),
    TASK + "minAvailable": ("task", {"minAvailable": 1}),
    TASK + "maxRetry": ("task", {"maxRetry": 5}),
    TASK + "policies": (
        "task",
        {"policies": [{"event": "TaskCompleted", "action": "CompleteJob"}]},
    ),
    TASK + "topologyPolicy": ("task", {"topologyPolicy": "single-numa-node"}),
    TASK + "dependsOn.iteration": ("depends", {"iteration": "any"}),
    TASK + "template.metadata": ("template", {"metadata": {"annotations": {"a": "b"}}}),
    POD + "hostNetwork": ("pod", {"hostNetwork": True}),
    POD + "hostPID": ("pod", {"hostPID": True}),
    POD + "hostIPC": ("pod", {"hostIPC": True}),
    POD + "affinity": ("pod", {"affinity": {"nodeAffinity": {}}}),
    POD + "restartPolicy": ("pod", {"restartPolicy": "OnFailure"}),
    POD + "schedulerName": ("pod", {"schedulerName": "volcano"}),
    POD + "priorityClassName": ("pod", {"priorityClassName": "high"}),
    POD + "serviceAccountName": ("pod", {"serviceAccountName": "mpi"}),
    POD + "imagePullSecrets": ("pod", {"imagePullSecrets": [{"name": "reg"}]}),
    POD + "nodeName": ("pod", {"nodeName": "node-3"}),
    POD + "initContainers": ("pod", {"initContainers": [{"name": "init", "image": "busybox"}]}),
    POD + "securityContext.runAsUser": ("pod", {"securityContext": {"runAsUser": 0}}),
    POD + "volumes[0].hostPath": ("volumes", {"name": "root", "hostPath": {"path": "/"}}),
    POD + "volumes[1].emptyDir": ("volumes", {"name": "shm", "emptyDir": {"medium": "Memory"}}),
    POD + "volumes[2].secret": ("volumes", {"name": "key", "secret": {"secretName": "k"}}),
    POD + "tolerations[0].tolerationSeconds": ("toleration", {"tolerationSeconds": 30}),
    MAIN + "securityContext.privileged": ("security", {"privileged": True}),
    MAIN + "securityContext.capabilities": ("security", {"capabilities": {"add": ["SYS_ADMIN"]}}),
    MAIN + "securityContext.allowPrivilegeEscalation": (
        "security",
        {"allowPrivilegeEscalation": True},
    ),
    MAIN + "volumeMounts": ("container", {"volumeMounts": [{"name": "root", "mountPath": "/h"}]}),
    MAIN + "env": ("container", {"env": [{"name": "OMP_NUM_THREADS", "value": "4"}]}),
    MAIN + "envFrom": ("container", {"envFrom": [{"secretRef": {"name": "k"}}]}),
    MAIN + "ports": ("container", {"ports": [{"containerPort": 22}]}),
    MAIN + "workingDir": ("container", {"workingDir": "/work"}),
    MAIN + "imagePullPolicy": ("container", {"imagePullPolicy": "Always"}),
    MAIN + "livenessProbe": ("container", {"livenessProbe": {"exec": {"command": ["true"]}}}),
    MAIN + "resources.claims": ("resources", {"claims": [{"name": "gpu"}]}),
    POD + "containers[1]": ("sidecar", {"name": "log", "image": "busybox"}),
}


def unhonoured() -> dict[str, Any]:
    """CLEAN with every field of ``FIELDS`` added where it belongs."""
    raw: dict[str, Any] = yaml.safe_load(CLEAN)
    task = raw["spec"]["tasks"][0]
    pod = task["template"]["spec"]
    main = pod["containers"][0]
    places = {
        "metadata": raw["metadata"],
        "spec": raw["spec"],
        "task": task,
        "depends": task["dependsOn"],
        "template": task["template"],
        "pod": pod,
        "toleration": pod["tolerations"][0],
        "container": main,
        "security": main.setdefault("securityContext", {}),
        "resources": main["resources"],
    }
    for place, fields in FIELDS.values():
        if place == "volumes":
            pod.setdefault("volumes", []).append(fields)
        elif place == "sidecar":
            pod["containers"].append(fields)
        else:
            places[place].update(copy.deepcopy(fields))
    return raw


def notices_of(raw: dict[str, Any]) -> list[Notice]:
    notes: list[Notice] = []
    import_volcano_job(raw, note=notes.append)
    return notes


def test_every_vcjob_field_read_but_not_honoured_is_a_notice_at_its_path() -> None:
    notes = notices_of(unhonoured())
    assert sorted(note.path for note in notes) == sorted(FIELDS)
    assert all(note.detail.startswith(("not honoured: ", "not run (log): ")) for note in notes)


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        (
            MAIN + "securityContext.privileged",
            "not honoured: phalanx runs no privileged containers: the task runs unprivileged",
        ),
        (POD + "volumes[0].hostPath", "not honoured: phalanx mounts no host path"),
        (POD + "hostNetwork", "not honoured: a task uses the host's network"),
        (POD + "securityContext.runAsUser", "not honoured: a task runs as its owner's uid"),
        (MAIN + "volumeMounts", "not honoured: phalanx mounts no volumes"),
        (TASK + "dependsOn.iteration", "not honoured: a task starts once every task it names"),
        (POD + "containers[1]", "not run (log): phalanx runs the first container only; its "),
        ("spec.plugins", "not honoured: phalanx runs no job plugin (env, svc, ssh ...)"),
    ],
)
def test_a_notice_says_what_phalanx_does_instead(path: str, detail: str) -> None:
    found = {note.path: note.detail for note in notices_of(unhonoured())}
    assert found[path].startswith(detail)


def test_a_clean_vcjob_has_no_notice() -> None:
    assert notices_of(yaml.safe_load(CLEAN)) == []


def test_notices_leave_the_import_unchanged() -> None:
    clean = import_volcano_job(yaml.safe_load(CLEAN))
    assert import_volcano_job(unhonoured()) == clean
    assert import_volcano_job(unhonoured(), note=lambda _: None) == clean


def test_a_volume_without_a_source_is_reported_whole() -> None:
    raw: dict[str, Any] = yaml.safe_load(CLEAN)
    raw["spec"]["tasks"][1]["template"]["spec"]["volumes"] = [{"name": "scratch"}]
    (note,) = notices_of(raw)
    assert note.path == "spec.tasks[1].template.spec.volumes[0]"
    assert note.detail == "not honoured: phalanx mounts no volumes: the task runs without it"


def test_a_sidecars_own_fields_are_reported_as_well() -> None:
    raw: dict[str, Any] = yaml.safe_load(CLEAN)
    containers = raw["spec"]["tasks"][1]["template"]["spec"]["containers"]
    containers.append(
        {"name": "debug", "image": "busybox", "securityContext": {"privileged": True}}
    )
    paths = [note.path for note in notices_of(raw)]
    sidecar = "spec.tasks[1].template.spec.containers[1]"
    assert paths == [f"{sidecar}.securityContext.privileged", sidecar]


def test_volcano_queue_fields_not_honoured_are_notices() -> None:
    raw: dict[str, Any] = yaml.safe_load(VOLCANO_QUEUE)
    notes: list[Notice] = []
    clean = import_volcano_queue(raw, note=notes.append)
    assert notes == []  # status is the API server's: passed in silence
    raw["spec"] |= {"affinity": {"nodeGroupAffinity": {}}, "extendClusters": [{"name": "c"}]}
    assert import_volcano_queue(raw, note=notes.append) == clean
    assert [note.path for note in notes] == ["spec.affinity", "spec.extendClusters"]
    assert notes[0].detail.startswith("not honoured: a phalanx queue has no node-group affinity")
