"""Importers: foreign documents (Volcano vcjob and Queue, OpenPAI jobs, Kubeflow
PyTorchJob, TFJob and MPIJob) converted to phalanx documents."""

from phalanx.spec.importers.kubeflow import (
    KUBEFLOW_API_VERSION,
    KUBEFLOW_KINDS,
    import_kubeflow_job,
)
from phalanx.spec.importers.openpai import (
    OPENPAI_NAME_ANNOTATION,
    import_openpai_job,
    is_openpai,
)
from phalanx.spec.importers.volcano import (
    BATCH_API_VERSION,
    DEFAULT_PRIORITY_CLASSES,
    SCHEDULING_API_VERSION,
    import_volcano_job,
    import_volcano_queue,
)

__all__ = [
    "BATCH_API_VERSION",
    "DEFAULT_PRIORITY_CLASSES",
    "KUBEFLOW_API_VERSION",
    "KUBEFLOW_KINDS",
    "OPENPAI_NAME_ANNOTATION",
    "SCHEDULING_API_VERSION",
    "import_kubeflow_job",
    "import_openpai_job",
    "import_volcano_job",
    "import_volcano_queue",
    "is_openpai",
]
