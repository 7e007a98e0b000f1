"""Kubeflow PyTorchJob, TFJob and MPIJob documents import into phalanx Jobs; what is
read but not honoured is said, and a malformed field is named at its Kubeflow path."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import Hostfile
from phalanx.domain.resources import Resources
from phalanx.spec import JobDocument, load_documents
from phalanx.spec.diagnostics import Notice
from phalanx.spec.importers.kubeflow import import_kubeflow_job
from tests.unit.spec.kubeflow_examples import MPI_JOB, PYTORCH_JOB, TF_JOB

GiB = 2**30
IMAGE = "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727"


def loaded(text: str, source: str = "kf.yaml") -> tuple[JobDocument, list[str]]:
    warnings: list[str] = []
    (document,) = load_documents(text, source=source, warn=warnings.append)
    assert isinstance(document, JobDocument)
    return document, warnings


def test_a_pytorchjob_imports_with_the_master_first() -> None:
    document, _ = loaded(PYTORCH_JOB)
    job = document.to_domain()
    assert (job.name, job.queue, job.priority, job.min_available, job.max_retry) == (
        "pytorch-simple",
        "nlp",
        500,
        3,
        2,
    )
    assert job.walltime == 3600
    assert document.metadata.labels == {"team": "nlp"}
    assert document.metadata.annotations == {"phalanx.io/priority-class": "prio-500"}
    master, worker = job.roles  # rank 0 is the master, whatever the document's order
    assert (master.name, master.replicas, worker.name, worker.replicas) == (
        "master",
        1,
        "worker",
        2,
    )
    assert master.command == ("python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1")
    assert worker.command == ("python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1")
    assert master.image == worker.image == IMAGE
    assert dict(master.env) == {"LOGLEVEL": "INFO"}  # WANDB_KEY comes from a Secret
    assert dict(master.node_selector) == {"gpu": "a100"}
    assert [t.key for t in master.tolerations] == ["dedicated"]
    # the first container only; requests win over limits per resource
    assert master.resources == Resources.of({"gpu": 1, "memory": 8 * GiB})
    assert worker.resources == Resources.of({"gpu": 1, "cpu": 2000, "memory": 8 * GiB})


def test_every_field_read_but_not_honoured_is_a_warning() -> None:
    _, warnings = loaded(PYTORCH_JOB)
    header = "kf.yaml document 1 (PyTorchJob pytorch-simple): "
    assert all(line.startswith(header) for line in warnings)
    master = "spec.pytorchReplicaSpecs.Master."
    container = master + "template.spec.containers"
    assert sorted(line.removeprefix(header).partition(": ")[0] for line in warnings) == sorted(
        [
            "metadata.namespace",
            "spec.runPolicy.cleanPodPolicy",
            "spec.pytorchReplicaSpecs.Worker.restartPolicy",
            master + "restartPolicy",
            master + "template.metadata",
            master + "template.spec.volumes",
            container + "[0].imagePullPolicy",
            container + "[0].ports",
            container + "[0].env[1].valueFrom",
            container + "[1]",
        ]
    )
    secret = next(line for line in warnings if "valueFrom" in line)
    assert "not honoured: phalanx reads no Secret" in secret
    sidecar = next(line for line in warnings if line.endswith("only its resources are requested"))
    assert "containers[1]: not run (logger)" in sidecar


def test_a_tfjob_ranks_chief_ps_worker_and_shares_gpu_memory() -> None:
    document, warnings = loaded(TF_JOB)
    job = document.to_domain()
    assert [(r.name, r.replicas) for r in job.roles] == [("chief", 1), ("ps", 1), ("worker", 2)]
    chief, ps, worker = job.roles
    assert worker.resources == Resources.of({"gpu-memory": 3 * GiB})
    assert ps.resources == Resources.of({"cpu": 500, "memory": GiB})
    assert chief.resources == Resources.of({})
    assert (job.queue, job.max_retry, job.min_available) == ("default", 3, None)
    assert warnings == []


def test_a_tfjob_of_workers_only_is_told_it_gets_no_tf_config() -> None:
    raw = yaml.safe_load(TF_JOB)
    del raw["spec"]["tfReplicaSpecs"]["PS"]
    notes: list[Notice] = []
    import_kubeflow_job(raw, note=notes.append)
    assert notes == []  # the chief marks it a TensorFlow job
    del raw["spec"]["tfReplicaSpecs"]["Chief"]
    import_kubeflow_job(raw, note=notes.append)
    assert notes == [
        Notice(
            path="spec.tfReplicaSpecs",
            detail="TF_CONFIG is not set: phalanx sets it for a job with a PS or Chief role",
        )
    ]


def test_an_mpijob_launcher_waits_for_its_workers_and_gets_their_hostfile() -> None:
    document, warnings = loaded(MPI_JOB)
    job = document.to_domain()
    launcher, worker = job.roles
    assert (launcher.name, launcher.replicas, worker.name, worker.replicas) == (
        "launcher",
        1,
        "worker",
        2,
    )
    assert launcher.depends_on == ("worker",)
    assert launcher.hostfile == Hostfile(role="worker", slots=2)
    assert worker.hostfile is None
    assert worker.resources == Resources.of({"gpu": 2})
    assert launcher.image == "mpioperator/tensorflow-benchmarks:latest"
    paths = [line.split(": ")[1] for line in warnings]
    assert paths == ["spec.runPolicy.cleanPodPolicy", "spec.mpiReplicaSpecs.Worker"]
    assert "workers must end by themselves" in warnings[1]


def test_slots_per_worker_defaults_to_one() -> None:
    raw = yaml.safe_load(MPI_JOB)
    del raw["spec"]["slotsPerWorker"]
    launcher = import_kubeflow_job(raw).to_domain().roles[0]
    assert launcher.hostfile == Hostfile(role="worker", slots=1)


class _WrittenOut(yaml.SafeDumper):
    """Writes shared values out in full: the loader refuses YAML aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def edited(text: str, edit: Any) -> str:
    raw = yaml.safe_load(text)
    edit(raw)
    return yaml.dump(raw, Dumper=_WrittenOut, sort_keys=False)


def _pt(raw: Any) -> Any:
    return raw["spec"]["pytorchReplicaSpecs"]


def _worker_container(raw: Any) -> Any:
    return _pt(raw)["Worker"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("text", "edit", "message"),
    [
        (
            PYTORCH_JOB,
            lambda r: _pt(r)["Worker"].update(replicas="2"),
            "spec.pytorchReplicaSpecs.Worker.replicas: expected an integer",
        ),
        (
            PYTORCH_JOB,
            lambda r: _pt(r)["Worker"].update(replicas=0),
            "spec.pytorchReplicaSpecs.Worker.replicas: must be >= 1",
        ),
        (
            PYTORCH_JOB,
            lambda r: _pt(r)["Master"].update(replicas=2),
            "spec.pytorchReplicaSpecs.Master.replicas: 2 replicas: a job has one Master; "
            "fix: set replicas: 1",
        ),
        (
            PYTORCH_JOB,
            lambda r: _pt(r).update(Launcher=_pt(r)["Worker"]),
            "spec.pytorchReplicaSpecs.Launcher: 'Launcher' is not a replica type of this kind; "
            "fix: use Master, Worker",
        ),
        (
            PYTORCH_JOB,
            lambda r: _pt(r)["Worker"]["template"]["spec"].update(containers=[]),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers: must not be empty",
        ),
        (
            PYTORCH_JOB,
            lambda r: _worker_container(r).update(image="Not An Image"),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image: "
            "'Not An Image' is not a valid image reference",
        ),
        (
            PYTORCH_JOB,
            lambda r: _worker_container(r)["resources"]["limits"].update({"nvidia.com/gpu": "x"}),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits",
        ),
        (
            PYTORCH_JOB,
            lambda r: _worker_container(r).update(env=[{"name": "1BAD", "value": "x"}]),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].env[0].name",
        ),
        (
            PYTORCH_JOB,
            lambda r: r["spec"]["runPolicy"].update(backoffLimit=-1),
            "spec.runPolicy.backoffLimit: must be >= 0",
        ),
        (
            PYTORCH_JOB,
            lambda r: r["spec"]["runPolicy"]["schedulingPolicy"].update(minAvailable=4),
            "spec.runPolicy.schedulingPolicy.minAvailable: 4 is more than the job's 3 replicas",
        ),
        (
            PYTORCH_JOB,
            lambda r: r["spec"]["runPolicy"]["schedulingPolicy"].update(queue="NLP"),
            "spec.runPolicy.schedulingPolicy.queue: 'NLP' is not a valid name",
        ),
        (
            PYTORCH_JOB,
            lambda r: r["spec"].pop("pytorchReplicaSpecs"),
            "spec.pytorchReplicaSpecs: is required",
        ),
        (
            PYTORCH_JOB,
            lambda r: r["metadata"].update(name="Pytorch_Simple"),
            "metadata.name: 'Pytorch_Simple' is not a valid name",
        ),
        (
            TF_JOB,
            lambda r: r["spec"]["tfReplicaSpecs"].update(worker=r["spec"]["tfReplicaSpecs"]["PS"]),
            "spec.tfReplicaSpecs.worker: replica types 'Worker' and 'worker' are the same",
        ),
        (
            MPI_JOB,
            lambda r: r["spec"]["mpiReplicaSpecs"].pop("Launcher"),
            "spec.mpiReplicaSpecs: has no Launcher; fix: add a Launcher replica spec",
        ),
        (
            MPI_JOB,
            lambda r: r["spec"].update(slotsPerWorker=0),
            "spec.slotsPerWorker: must be >= 1",
        ),
    ],
)
def test_a_malformed_field_is_named_at_its_kubeflow_path(
    text: str, edit: Any, message: str
) -> None:
    with pytest.raises(DocumentError) as caught:
        load_documents(edited(text, edit), source="kf.yaml")
    assert message in str(caught.value)


def test_an_unknown_kubeflow_kind_names_the_known_ones() -> None:
    text = PYTORCH_JOB.replace("kind: PyTorchJob", "kind: XGBoostJob")
    with pytest.raises(DocumentError) as caught:
        load_documents(text)
    assert "kind: XGBoostJob of apiVersion kubeflow.org/v1 is not a known kind" in str(caught.value)
    assert "kubeflow.org/v1 MPIJob" in str(caught.value)


def test_an_imported_job_renders_back_as_a_phalanx_job() -> None:
    """What the server stores (the canonical form) loads again, without warnings."""
    document, _ = loaded(MPI_JOB)
    again, warnings = loaded(
        yaml.safe_dump(document.model_dump(mode="json", by_alias=True, exclude_none=True))
    )
    assert again == document
    assert warnings == []


def test_the_importer_called_directly_refuses_another_kind() -> None:
    raw = yaml.safe_load(PYTORCH_JOB)
    raw["kind"] = "Job"
    with pytest.raises(ValidationError) as caught:
        import_kubeflow_job(raw)
    assert "'Job' is not a Kubeflow job kind; fix: use PyTorchJob, TFJob, MPIJob" in str(
        caught.value
    )


def test_a_container_without_command_or_with_args_alone_is_told_what_runs() -> None:
    raw = yaml.safe_load(MPI_JOB)
    specs = raw["spec"]["mpiReplicaSpecs"]
    specs["Worker"]["template"]["spec"]["containers"][0].pop("command")
    launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
    launcher["args"] = launcher.pop("command")
    notes: list[Notice] = []
    document = import_kubeflow_job(raw, note=notes.append)
    assert document.spec.roles[0].command[0] == "mpirun"
    found = {note.path: note.detail for note in notes}
    assert found["spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].args"].startswith(
        "run as the command itself"
    )
    assert found["spec.mpiReplicaSpecs.Worker.template.spec.containers[0]"].startswith(
        "has no command"
    )
