"""The phalanx SDK: a typed client of the control plane's HTTP API.

```python
from phalanx.client import Client

with Client() as phalanx:                   # PHALANX_SERVER / PHALANX_TOKEN, or the config file
    phalanx.apply("jobs.yaml")              # queues, then jobs
    for job in phalanx.jobs(queue="nlp"):
        print(job.name, job.phase)
    phalanx.wait("bert-pretrain", phase="Succeeded", timeout=3600)
    print("".join(phalanx.logs("bert-pretrain")))
```

Errors::

    PhalanxError
    ├── ClientError      the server refused, could not be reached, or answered nonsense
    │   └── WaitError    ``Client.wait`` (``wait_run``) did not see the phase asked for
    │       ├── WaitTimeout  ... before its timeout
    │       ├── JobEnded     ... because the job ended in another phase
    │       └── RunEnded     ... because the run ended in another phase
    └── DocumentError    a document given to ``apply`` does not validate (nothing was sent)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from phalanx.client._client import (
    DEFAULT_TIMEOUT,
    Applied,
    Client,
    Health,
    LogChunks,
    ReportFile,
)
from phalanx.client._config import DEFAULT_SERVER, Endpoint, config_path, resolve_endpoint
from phalanx.client._errors import ClientError
from phalanx.client._wait import JobEnded, RunEnded, WaitError, WaitTimeout
from phalanx.domain.errors import DocumentError
from phalanx.wire.gpus import (
    CardCordonView,
    CardUncordonView,
    GpuUseView,
    JobGpusView,
    TaskGpuView,
)
from phalanx.wire.priority import PriorityListView, WaitingPriorityView
from phalanx.wire.views import (
    CacheEntryView,
    DatasetView,
    EventView,
    GpuView,
    HistoryBucketView,
    HistoryView,
    InferenceView,
    JobPriorityView,
    JobSummaryView,
    JobView,
    ModelFileView,
    ModelVersionView,
    ModelView,
    NodeView,
    PipelineView,
    PredictorView,
    QueueView,
    ReplicaView,
    ReportView,
    RolloutStepView,
    RolloutView,
    RunView,
    SecretView,
    StepView,
    TaskView,
    TokenInfoView,
    TokenView,
    TrialView,
    TuningView,
    UserView,
    WhyView,
)

__all__ = [
    "DEFAULT_SERVER",
    "DEFAULT_TIMEOUT",
    "Applied",
    "ApplyInput",
    "CacheEntryView",
    "CardCordonView",
    "CardUncordonView",
    "Client",
    "ClientError",
    "DatasetView",
    "DocumentError",
    "Endpoint",
    "EventView",
    "GpuUseView",
    "GpuView",
    "Health",
    "HistoryBucketView",
    "HistoryView",
    "InferenceView",
    "JobEnded",
    "JobGpusView",
    "JobPriorityView",
    "JobSummaryView",
    "JobView",
    "LogChunks",
    "ModelFileView",
    "ModelVersionView",
    "ModelView",
    "NodeView",
    "PipelineView",
    "PredictorView",
    "PreparedDocument",
    "PriorityListView",
    "QueueView",
    "ReplicaView",
    "ReportFile",
    "ReportView",
    "RolloutStepView",
    "RolloutView",
    "RunEnded",
    "RunView",
    "SecretView",
    "StepView",
    "TaskGpuView",
    "TaskView",
    "TokenInfoView",
    "TokenView",
    "TrialView",
    "TuningView",
    "UserView",
    "WaitError",
    "WaitTimeout",
    "WaitingPriorityView",
    "WhyView",
    "config_path",
    "prepare_documents",
    "prepare_text",
    "queues_first",
    "resolve_endpoint",
]

#: Names loaded on first use: validating documents needs every document model (and the
#: engine's), which commands that only read the API never touch.
_DOCUMENTS: Final = frozenset(
    {"ApplyInput", "PreparedDocument", "prepare_documents", "prepare_text", "queues_first"}
)

if TYPE_CHECKING:
    from phalanx.client._documents import (
        ApplyInput,
        PreparedDocument,
        prepare_documents,
        prepare_text,
        queues_first,
    )


def __getattr__(name: str) -> Any:
    """``_DOCUMENTS``, imported when first asked for (PEP 562)."""
    if name in _DOCUMENTS:
        import phalanx.client._documents as documents  # noqa: PLC0415

        return getattr(documents, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
