"""Model versions: a content-addressed store of the directories training jobs write
(``store``), and the manifest naming each version's files (``manifest``)."""

from phalanx.models.manifest import FileEntry, Manifest, ManifestError
from phalanx.models.store import ModelCorrupt, ModelMissing, ModelStore

__all__ = ["FileEntry", "Manifest", "ManifestError", "ModelCorrupt", "ModelMissing", "ModelStore"]
