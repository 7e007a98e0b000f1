"""An OpenPAI field read but not honoured is a notice naming its OpenPAI path and what
phalanx does instead; a clean job has none, and notices change no import."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from phalanx.spec.diagnostics import Notice
from phalanx.spec.importers.openpai import import_openpai_job
from tests.unit.spec.openpai_examples import PYTORCH_DDP_NCCL, SMALL, TENSORFLOW_CIFAR10

WORKER = "taskRoles.worker."


def unhonoured() -> dict[str, Any]:
    """SMALL with every kind of field phalanx reads but does not honour."""
    raw: dict[str, Any] = yaml.safe_load(SMALL)
    raw |= {
        "version": "1.0",
        "contributor": "alice",
        "description": "a small job",
        "secrets": {"token": "hf_not_a_real_one"},
        "deployments": [{"name": "prod", "version": 2, "taskRoles": {"worker": {}}}],
        "extras": {
            "gangAllocation": True,
            "hivedScheduler": {"taskRoles": {"worker": {"skuType": "DT"}}},
            "com.microsoft.pai.runtimeplugin": [{"plugin": "ssh"}],
            "storages": [{"name": "confignfs"}],
            "submitFrom": "cli",
        },
    }
    image = raw["prerequisites"][0]
    image["auth"] = {"username": "alice", "password": "x", "registryuri": "reg.example"}
    image["failurePolicy"] = "ignore"
    raw["prerequisites"].append({"name": "tb", "type": "script", "plugin": "tensorboard"})
    raw["taskRoles"]["worker"] |= {
        "completion": {"minFailedInstances": None, "minSucceededInstances": 1},
        "taskRetryCount": 2,
        "prerequisites": ["tb"],
        "extraContainerOptions": {"shmMB": 1024, "infiniband": True, "cpuset": "0-3"},
    }
    raw["taskRoles"]["worker"]["resourcePerInstance"]["ports"] = {"ssh": 1, "http": 1}
    return raw


EXPECTED = {
    "version": "phalanx keeps no version of a job",
    "contributor": "phalanx keeps no contributor",
    "description": "phalanx keeps no description of a job",
    "secrets": "phalanx keeps no secrets",
    "prerequisites[0].auth": "phalanx pulls images as the node's runtime is logged in",
    "prerequisites[0].failurePolicy": "phalanx does not model it",
    WORKER + "completion.minFailedInstances": "a phalanx job fails at its first failed task",
    WORKER + "completion.minSucceededInstances": "a phalanx job succeeds when all its tasks",
    WORKER + "taskRetryCount": "phalanx retries a failed job whole (jobRetryCount)",
    WORKER + "resourcePerInstance.ports": "phalanx reserves no ports",
    WORKER + "extraContainerOptions.shmMB": "phalanx sets no /dev/shm size",
    WORKER + "extraContainerOptions.cpuset": "phalanx does not model it",
    WORKER + "prerequisites[0]": "phalanx runs no OpenPAI runtime plugin ('tensorboard')",
    "deployments[0].version": "phalanx does not model it",
    "extras.hivedScheduler": "phalanx places every task itself",
    "extras['com.microsoft.pai.runtimeplugin']": "phalanx runs no OpenPAI runtime plugin",
    "extras.storages": "phalanx mounts no OpenPAI storage",
    "extras.submitFrom": "phalanx does not model it",
}


def notices_of(raw: dict[str, Any]) -> list[Notice]:
    notes: list[Notice] = []
    import_openpai_job(raw, note=notes.append)
    return notes


def test_every_openpai_field_read_but_not_honoured_is_a_notice_at_its_path() -> None:
    found = {note.path: note.detail for note in notices_of(unhonoured())}
    assert sorted(found) == sorted(EXPECTED)
    for path, words in EXPECTED.items():
        assert words in found[path], path
    assert found[WORKER + "prerequisites[0]"].startswith("not run: ")
    others = [detail for path, detail in found.items() if path != WORKER + "prerequisites[0]"]
    assert all(detail.startswith("not honoured: ") for detail in others)
    assert not any("hf_not_a_real_one" in detail for detail in found.values())


def test_a_clean_openpai_job_has_no_notice() -> None:
    raw: dict[str, Any] = yaml.safe_load(SMALL)
    # OpenPAI's defaults written out are what phalanx does; a prerequisite's descriptive
    # fields are values the commands may refer to.
    raw["prerequisites"][0] |= {"protocolVersion": 2, "version": "22.04", "description": "os"}
    raw["taskRoles"]["worker"] |= {
        "completion": {"minFailedInstances": 1, "minSucceededInstances": 2},
        "taskRetryCount": 0,
        "extraContainerOptions": {"infiniband": False},
    }
    raw["extras"] = {"gangAllocation": True}
    raw["secrets"] = {}
    assert notices_of(raw) == []


def test_notices_leave_the_import_unchanged() -> None:
    clean: dict[str, Any] = yaml.safe_load(SMALL)
    clean["taskRoles"]["worker"]["extraContainerOptions"] = {"infiniband": True}
    expected = import_openpai_job(clean)
    assert import_openpai_job(unhonoured()) == expected
    assert import_openpai_job(unhonoured(), note=lambda _: None) == expected


@pytest.mark.parametrize(
    ("example", "paths"),
    [
        (
            TENSORFLOW_CIFAR10,
            [
                "version",
                "contributor",
                "description",
                # the job ends with the worker in OpenPAI; the ps never ends by itself
                "taskRoles.worker.completion.minSucceededInstances",
                "taskRoles.psserver.completion.minSucceededInstances",
            ],
        ),
        (
            PYTORCH_DDP_NCCL,
            [
                "taskRoles.worker.resourcePerInstance.ports",
                "extras['com.microsoft.pai.runtimeplugin']",
                "extras.hivedScheduler",
            ],
        ),
    ],
)
def test_openpais_own_examples_are_told_what_is_not_honoured(
    example: str, paths: list[str]
) -> None:
    assert [note.path for note in notices_of(yaml.safe_load(example))] == paths
