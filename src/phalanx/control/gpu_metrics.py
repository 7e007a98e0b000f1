"""GPU readings on ``/metrics``, under the DCGM exporter's names and labels.

Each card of each node is one series per metric, labelled as NVIDIA's dcgm-exporter
labels it (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``) so that existing
DCGM dashboards and alerts work unchanged, plus phalanx's own ``job``, ``task``,
``user`` and ``queue`` of the task given the card (empty for a free card; a shared card
has one series per task, as the exporter's per-pod mapping gives). Units are the
exporter's: percent, MiB, degrees Celsius, watts. Every value is the node's latest
reading, read from the controller's published picture at scrape time.

phalanx's own: ``phalanx_gpu_cordoned`` (1 per card out of scheduling, with its
``source``), ``phalanx_job_gpu_utilisation`` (each job's mean over its current
window), ``phalanx_job_gpus_idle_seconds`` (how long a watched job's cards have sat
below its queue's threshold).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from phalanx.telemetry.readings import CardReading

if TYPE_CHECKING:
    from phalanx.control.controllers.telemetry import GpuPicture

_MIB: Final = float(1 << 20)
_CARD_LABELS: Final = ["gpu", "UUID", "device", "modelName", "Hostname"]
_TASK_LABELS: Final = ["job", "task", "user", "queue"]
_JOB_LABELS: Final = ["job", "user", "queue"]

#: name, help, the reading's value: the dcgm-exporter's default counters.
_FIELDS: Final[tuple[tuple[str, str, Callable[[CardReading], float]], ...]] = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda c: c.utilisation),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda c: c.memory_used / _MIB),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", lambda c: c.memory_free / _MIB),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda c: c.temperature),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda c: c.power),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", lambda c: c.xid),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "Total number of PCIe retries.",
        lambda c: c.pcie_replays,
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for correctable errors.",
        lambda c: c.remapped_correctable,
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for uncorrectable errors.",
        lambda c: c.remapped_uncorrectable,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "Whether remapping of rows has failed.",
        lambda c: float(c.remap_failure),
    ),
)


class GpuCollector(Collector):
    """See the module docstring; ``picture`` is the controller's latest."""

    def __init__(self, picture: Callable[[], GpuPicture]) -> None:
        self._picture = picture

    def collect(self) -> Iterator[GaugeMetricFamily]:
        picture = self._picture()
        families = [
            (GaugeMetricFamily(name, text, labels=_CARD_LABELS + _TASK_LABELS), value)
            for name, text, value in _FIELDS
        ]
        for node, cards in sorted(picture.cards.items()):
            for card in cards:
                base = [str(card.index), card.uuid, f"nvidia{card.index}", card.model, node]
                for labels in self._task_labels(picture, node, card.index):
                    for family, value in families:
                        family.add_metric(base + labels, float(value(card)))
        yield from (family for family, _ in families)
        yield self._cordoned(picture)
        yield from self._jobs(picture)

    @staticmethod
    def _task_labels(picture: GpuPicture, node: str, index: int) -> list[list[str]]:
        holders = picture.holders.get((node, index), ())
        if not holders:
            return [["", "", "", ""]]
        out = []
        for job, task in holders:
            user, queue = picture.owners.get(job, ("", ""))
            out.append([job, task, user, queue])
        return out

    @staticmethod
    def _cordoned(picture: GpuPicture) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "phalanx_gpu_cordoned",
            "1 for each card out of scheduling: by its health or by an admin (source).",
            labels=["Hostname", "gpu", "source"],
        )
        for (node, gpu), cordon in sorted(picture.cordoned.items()):
            family.add_metric([node, str(gpu), cordon.source], 1.0)
        return family

    @staticmethod
    def _jobs(picture: GpuPicture) -> Iterator[GaugeMetricFamily]:
        utilisation = GaugeMetricFamily(
            "phalanx_job_gpu_utilisation",
            "Each job's mean GPU utilisation (in %) over its current window (about a minute).",
            labels=_JOB_LABELS,
        )
        for job, use in sorted(picture.current.items()):
            user, queue = picture.owners.get(job, ("", ""))
            utilisation.add_metric([job, user, queue], use.utilisation)
        yield utilisation
        idle = GaugeMetricFamily(
            "phalanx_job_gpus_idle_seconds",
            "How long every card of a job has sat below its queue's idleGpus threshold.",
            labels=_JOB_LABELS,
        )
        now = time.time()
        for job, since in sorted(picture.idle_since.items()):
            user, queue = picture.owners.get(job, ("", ""))
            idle.add_metric([job, user, queue], max(0.0, now - since))
        yield idle
