"""Importers: foreign documents (Volcano vcjob and Queue) converted to phalanx documents."""

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
    "SCHEDULING_API_VERSION",
    "import_volcano_job",
    "import_volcano_queue",
]
