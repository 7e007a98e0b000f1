"""OpenPAI job protocol documents import into phalanx Job documents."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from phalanx.domain.errors import DocumentError
from phalanx.domain.resources import Resources
from phalanx.spec import JobDocument, import_openpai_job, load_documents
from tests.unit.spec.examples import MINIMAL_JOB
from tests.unit.spec.openpai_examples import PYTORCH_DDP_NCCL, SMALL, TENSORFLOW_CIFAR10

MiB = 2**20

# What OpenPAI's TensorFlow example runs: the deployment's preCommands, the task
# role's commands, its postCommands; references substituted; joined with " && ".
FETCH = (
    "wget -qO- https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz | tar xvz"
    " && mv cifar-10-batches-py data_cifar10"
    " && git clone https://github.com/MaggieQi/benchmarks script_tensorflow_cnnbenchmarks"
    " && cd script_tensorflow_cnnbenchmarks"
    " && git checkout 84820935288cab696c9c2ac409cbd46a1f24723d && cd .."
    " && cd script_tensorflow_cnnbenchmarks/scripts/tf_cnn_benchmarks"
)


def tf_command(job_name: str, data_flags: str) -> str:
    return (
        f"{FETCH} && python tf_cnn_benchmarks.py --job_name={job_name}"
        " --local_parameter_device=gpu --variable_update=parameter_server"
        " --ps_hosts=$PAI_TASK_ROLE_psserver_HOST_LIST"
        " --worker_hosts=$PAI_TASK_ROLE_worker_HOST_LIST"
        " --task_index=$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"
        f" {data_flags}"
        " --train_dir=$PAI_WORK_DIR/output_tensorflow_cifar10_model"
        " --model=resnet20 --batch_size=32"
    )


def small(**edits: Any) -> dict[str, Any]:
    """The SMALL job as a mapping, with top-level ``edits`` and ``worker`` edits."""
    raw: dict[str, Any] = yaml.safe_load(SMALL)
    raw["taskRoles"]["worker"].update(edits.pop("worker", {}))
    raw.update(edits)
    return raw


class _WrittenOut(yaml.SafeDumper):
    """Writes shared values out in full: the loader refuses YAML aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def refusal(raw: dict[str, Any] | str) -> DocumentError:
    text = raw if isinstance(raw, str) else yaml.dump(raw, Dumper=_WrittenOut, sort_keys=False)
    with pytest.raises(DocumentError) as caught:
        load_documents(text, source="pai.yaml")
    return caught.value


def test_the_tensorflow_example_converts_to_the_expected_job() -> None:
    (document,) = load_documents(TENSORFLOW_CIFAR10, source="tensorflow-cifar10.yaml")
    resources = {"cpu": 2, "memory": "16384Mi"}
    expected = JobDocument.model_validate(
        {
            "apiVersion": "phalanx/v1",
            "kind": "Job",
            "metadata": {
                "name": "tensorflow-cifar10",
                "annotations": {"phalanx.io/openpai-name": "tensorflow_cifar10"},
            },
            "spec": {
                "queue": "default",
                "minAvailable": 2,
                "maxRetry": 0,
                "roles": [
                    {
                        "name": "worker",
                        "replicas": 1,
                        "resources": {**resources, "gpu": 4},
                        "image": "openpai/pai.example.tensorflow",
                        "command": tf_command(
                            "worker",
                            "--data_name=cifar10 --data_dir=$PAI_WORK_DIR/data_cifar10",
                        ),
                    },
                    {
                        "name": "psserver",
                        "replicas": 1,
                        "resources": {**resources, "gpu": 1},
                        "image": "openpai/pai.example.tensorflow",
                        "command": tf_command(
                            "ps", "--data_dir=$PAI_WORK_DIR/data_cifar10 --data_name=cifar10"
                        )
                        + ' && echo "Uploading data ..."',
                    },
                ],
            },
        }
    )
    assert document == expected
    worker, ps = document.to_domain().roles
    assert worker.command[:2] == ("/bin/sh", "-c")
    assert worker.resources == Resources.of({"cpu": 2000, "memory": 16384 * MiB, "gpu": 4})
    assert ps.resources.get("gpu") == 1


def test_the_pytorch_ddp_example_converts_to_the_expected_job() -> None:
    (document,) = load_documents(PYTORCH_DDP_NCCL, source="ddp.yaml")
    assert isinstance(document, JobDocument)
    job = document.to_domain()
    # capitals lowered; hivedScheduler, the ssh runtime plugin and ports ignored
    assert (job.name, job.queue, job.min_available, job.max_retry) == (
        "cifar10-single-mul-ddp-nccl-1",
        "default",
        2,
        0,
    )
    (worker,) = job.roles
    assert worker.replicas == 2
    assert worker.resources == Resources.of({"cpu": 8000, "memory": 16384 * MiB, "gpu": 2})
    assert worker.command[2] == (
        "git clone https://github.com/NVIDIA/apex && cd apex && python setup.py install"
        " && cd .. && wget https://raw.githubusercontent.com/vvfreesoul/pai/master/examples/"
        "Distributed-example/cifar10-single-mul-DDP-nccl-gloo.py"
        " && python  cifar10-single-mul-DDP-nccl-gloo.py -n 2 -g 2 --epochs 2 --dist-backend nccl"
    )


def test_parameters_are_substituted_into_commands() -> None:
    raw = small(
        parameters={
            "lr": 0.001,
            "epochs": 3.0,
            "fp16": True,
            "extra": None,
            "opt": {"name": "adam"},
            "hosts": ["a", "b"],
        },
        worker={
            "commands": [
                "  python train.py --lr <% $parameters.lr %> --epochs <%$parameters.epochs%>  ",
                "echo <% $parameters.fp16 %>[<% $parameters.extra %>]",
                "echo <% $parameters.opt.name %> <% $parameters.hosts[1] %>",
            ]
        },
    )
    (role,) = import_openpai_job(raw).spec.roles
    assert role.command[2] == (
        "python train.py --lr 0.001 --epochs 3 && echo true[] && echo adam b"
    )


@pytest.mark.parametrize(
    ("command", "path", "fix"),
    [
        ("run <% $parameters.lr %>", "taskRoles.worker.commands[0]", "add lr under parameters"),
        ("run <% $secrets.token %>", "taskRoles.worker.commands[0]", "through its environment"),
        ("run <% $parameters %>", "taskRoles.worker.commands[0]", "refer to one of its entries"),
        ("run <% $data.uri %>", "taskRoles.worker.commands[0]", "set taskRoles.worker.data"),
        ("run <% $parameters.steps", "taskRoles.worker.commands[0]", "close the reference"),
        ("run <%# section %>", "taskRoles.worker.commands[0]", "<% $parameters.name %>"),
    ],
)
def test_references_that_cannot_be_resolved_are_refused(command: str, path: str, fix: str) -> None:
    error = refusal(small(worker={"commands": [command]}))
    assert f"pai.yaml document 1 (OpenPAI job small_job): {path}: " in str(error)
    assert error.field == path
    assert error.fix is not None
    assert fix in error.fix


@pytest.mark.parametrize(("gang", "min_available"), [(None, 2), (True, 2), (False, 1)])
def test_gang_allocation_sets_min_available(gang: bool | None, min_available: int) -> None:
    raw = small() if gang is None else small(extras={"gangAllocation": gang})
    assert import_openpai_job(raw).spec.min_available == min_available


def test_queue_retries_and_infiniband_map() -> None:
    raw = small(
        defaults={"virtualCluster": "Team_A"},
        jobRetryCount=2,
        worker={"extraContainerOptions": {"infiniband": True, "shmMB": 64}},
    )
    spec = import_openpai_job(raw).spec
    assert (spec.queue, spec.max_retry) == ("team-a", 2)
    assert spec.roles[0].resources["rdma/hca"] == 1


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("tensorflow_cifar10", "tensorflow-cifar10"),
        ("TF_Cifar10_", "tf-cifar10"),
        ("__a__b__", "a--b"),
        ("BERT-large-2", "bert-large-2"),
    ],
)
def test_names_become_dns_1123_names(written: str, name: str) -> None:
    document = import_openpai_job(small(name=written))
    assert document.metadata.name == name
    assert document.metadata.annotations["phalanx.io/openpai-name"] == written


@pytest.mark.parametrize(
    ("written", "fix"),
    [
        ("___", "put at least one letter or digit in the name"),
        ("bert.large", "rename it with letters, digits, '_' and '-' only"),
        ("x" * 254, "shorten it to 253 characters"),
    ],
)
def test_names_without_a_dns_1123_form_are_refused(written: str, fix: str) -> None:
    error = refusal(small(name=written))
    assert error.field == "name"
    assert error.fix == fix


def test_task_roles_that_become_one_name_are_refused() -> None:
    raw = small()
    raw["taskRoles"]["Worker"] = raw["taskRoles"]["worker"]
    error = refusal(raw)
    assert "taskRoles.Worker: becomes role 'worker', as 'worker' does" in str(error)
    assert error.fix == "rename one of the two task roles"


@pytest.mark.parametrize(
    ("raw", "path", "message"),
    [
        (
            {k: v for k, v in small().items() if k != "taskRoles"},
            "taskRoles",
            "is required; fix: add this field",
        ),
        (small(taskRoles={}), "taskRoles", "must not be empty"),
        (
            small(worker={"instances": -1}),
            "taskRoles.worker.instances",
            "must be >= 1, got -1; fix: use a value >= 1",
        ),
        (
            small(worker={"resourcePerInstance": {"cpu": 4, "memoryMB": 8192, "gpu": "two"}}),
            "taskRoles.worker.resourcePerInstance.gpu",
            "expected an integer, got 'two'; fix: write a whole number such as 2",
        ),
        (
            small(jobRetryCnt=2),
            "jobRetryCnt",
            "unknown field; fix: did you mean 'jobRetryCount'?",
        ),
        (
            small(worker={"replicas": 2}),
            "taskRoles.worker.replicas",
            "unknown field; fix:",
        ),
        (
            small(protocolVersion=1),
            "protocolVersion",
            "1 is not allowed",
        ),
        (small(type="data"), "type", "'data' is not allowed; fix: use one of 'job'"),
        (
            small(worker={"dockerImage": "cuda"}),
            "taskRoles.worker.dockerImage",
            "no dockerimage prerequisite is named 'cuda'; fix: name one of: image",
        ),
        (
            small(prerequisites=[{"type": "dockerimage", "name": "image", "uri": "Ubuntu 22"}]),
            "prerequisites[0].uri",
            "'Ubuntu 22' is not an image reference; fix: write the image as",
        ),
        (
            small(prerequisites=[{"type": "model", "name": "m", "uri": "x"}]),
            "prerequisites[0].type",
            "'model' is not allowed",
        ),
        (
            small(defaults={"deployment": "prod"}),
            "defaults.deployment",
            "no deployment is named 'prod'; fix: remove defaults.deployment",
        ),
        (
            small(extras={"gangAllocation": "no"}),
            "extras.gangAllocation",
            "expected true or false",
        ),
        (
            small(worker={"commands": ["train", "  "]}),
            "taskRoles.worker.commands[1]",
            "the command line is empty",
        ),
    ],
)
def test_malformed_documents_name_the_openpai_path_and_the_fix(
    raw: dict[str, Any], path: str, message: str
) -> None:
    error = refusal(raw)
    assert f"pai.yaml document 1 (OpenPAI job small_job): {path}: {message}" in str(error)
    assert error.field == path
    assert error.fix


def test_a_prerequisite_with_runtime_plugin_callbacks_is_refused_where_it_is_used() -> None:
    setup = {
        "type": "script",
        "name": "install-git",
        "plugin": "com.microsoft.pai.runtimeplugin.cmd",
        "callbacks": [{"event": "taskStarts", "commands": ["apt install -y git"]}],
    }
    raw = small(prerequisites=[*small()["prerequisites"], setup])
    assert import_openpai_job(raw).spec.roles[0].replicas == 2  # defined but unused: fine
    raw["taskRoles"]["worker"]["prerequisites"] = ["install-git"]
    error = refusal(raw)
    assert error.field == "taskRoles.worker.prerequisites[0]"
    assert error.fix is not None
    assert "move its commands into taskRoles.worker.commands" in error.fix


def test_the_importer_raises_validation_errors_for_direct_callers() -> None:
    with pytest.raises(ValidationError):
        import_openpai_job(small(worker={"commands": ["<% $parameters.nope %>"]}))
    with pytest.raises(ValidationError):
        import_openpai_job(small(worker={"instances": 0}))


def test_a_stream_mixing_phalanx_and_openpai_jobs_loads_both() -> None:
    text = f"{MINIMAL_JOB}---\n{SMALL}---\n{TENSORFLOW_CIFAR10}"
    documents = load_documents(text, source="mixed.yaml")
    assert [type(d) for d in documents] == [JobDocument] * 3
    assert [d.metadata.name for d in documents] == ["bert", "small-job", "tensorflow-cifar10"]


def test_an_error_in_the_second_document_names_it() -> None:
    bad = SMALL.replace("gpu: 1", "gpu: two")
    error = refusal(f"{MINIMAL_JOB}---\n{bad}")
    assert str(error).startswith(
        "pai.yaml document 2 (OpenPAI job small_job): "
        "taskRoles.worker.resourcePerInstance.gpu: expected an integer"
    )


def test_a_task_roles_docker_image_becomes_its_image() -> None:
    (document,) = load_documents(yaml.safe_dump(small()), source="pai.yaml")
    assert isinstance(document, JobDocument)
    assert [role.image for role in document.spec.roles] == ["ubuntu:22.04"]
