"""User documents (Queue, Job, Cluster, SchedulerConfig, Pipeline) and their loading.

``load_documents`` / ``load_file`` read YAML or JSON, validate each document and
raise ``phalanx.domain.errors.DocumentError`` naming the source, document, field
and fix. Each document converts to domain values (``to_domain()``, ``nodes()``) or
to the engine's configuration (``to_engine()``). Volcano documents, OpenPAI jobs and
Kubeflow PyTorchJob, TFJob and MPIJob documents are accepted through
``phalanx.spec.importers``; what they ask for that phalanx does not honour is told to
the loaders' ``warn``.
"""

from phalanx.spec.cluster import ClusterDocument, GpuSpec, NodeGroupSpec
from phalanx.spec.common import API_VERSION, Metadata, parse_duration
from phalanx.spec.importers import import_openpai_job, import_volcano_job, import_volcano_queue
from phalanx.spec.job import JobDocument, RoleSpec
from phalanx.spec.limits import MAX_INPUT_SIZE
from phalanx.spec.loader import KNOWN_KINDS, Document, load_documents, load_file
from phalanx.spec.quantity import ResourceMap, resources_of
from phalanx.spec.queue import QueueDocument
from phalanx.spec.scheduler import SchedulerConfigDocument

__all__ = [
    "API_VERSION",
    "KNOWN_KINDS",
    "MAX_INPUT_SIZE",
    "ClusterDocument",
    "Document",
    "GpuSpec",
    "JobDocument",
    "Metadata",
    "NodeGroupSpec",
    "QueueDocument",
    "ResourceMap",
    "RoleSpec",
    "SchedulerConfigDocument",
    "import_openpai_job",
    "import_volcano_job",
    "import_volcano_queue",
    "load_documents",
    "load_file",
    "parse_duration",
    "resources_of",
]
