"""How a job splits its batch over its replicas (Pollux's and Sia's ``Job.update_local_bsz``).

A job of ``replicas`` GPUs runs, per iteration, ``accumulation + 1`` steps of
``atomic`` samples on each replica. With a fixed total batch (a trace row's) the local
batch ``ceil(batch / replicas)`` is cut into steps of at most a largest local batch, and
a single replica above the smallest profiled batch accumulates at least once. That
largest local batch is the profile's (Pollux's), except on Sia's per-GPU-type curves
(``gpu_model`` not "") when the placement is given: there it is the largest measured on
that placement (Sia's ``Application.get_max_local_bsz``), and the step is further held
to the largest local batch measured at that GPU count (Sia's memory correction). With an
adaptive batch the goodput model picks the configuration (until the job has a model, it
runs at the smallest batch its replicas allow, split by the profile's largest). Either
way the step is capped so the total stays within the largest profiled batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from phalanx.engine.goodput import BatchLimits, GoodputModel
from phalanx.sim.elastic.profile import AppProfile
from phalanx.sim.elastic.throughput import normalise

#: Tolerance of the ceilings that split a batch (Pollux's).
EPS = 1e-8


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchConfig:
    """How a job of ``replicas`` runs its batch: a step of ``atomic`` samples per replica,
    ``accumulation`` extra compute-only steps per iteration."""

    replicas: int
    atomic: int
    accumulation: int

    @property
    def batch(self) -> int:
        """Samples per iteration over all replicas."""
        return self.replicas * self.atomic * (self.accumulation + 1)


def limits(profile: AppProfile) -> BatchLimits:
    """The batch limits of ``profile``'s application, as Pollux's job passes them to its
    goodput model."""
    return BatchLimits(
        max_batch_size=profile.max_batch,
        min_atomic_bsz=profile.min_local_batch,
        max_atomic_bsz=profile.max_local_batch,
        accumulation=True,
    )


def fixed_batch(
    profile: AppProfile,
    replicas: int,
    batch_size: int,
    *,
    placement: Sequence[int] | None = None,
) -> BatchConfig:
    """The split of a fixed ``batch_size`` over ``replicas``: Pollux's, by the profile's
    largest local batch; on Sia's per-type curves (``profile.gpu_model`` not "") with the
    ``placement`` (GPUs per node) given, Sia's: by the largest local batch measured on that
    placement (``placement_max_local``), then held to the largest measured at that GPU
    count (``replicas_max_local``). The result's ``atomic`` times ``replicas`` times
    ``accumulation + 1`` never exceeds the profile's largest batch. Default curves
    (Pollux's) ignore ``placement``. Raises ValueError when ``placement`` does not hold
    ``replicas`` GPUs."""
    typed = placement is not None and profile.gpu_model != ""
    largest = profile.max_local_batch
    if placement is not None:
        if sum(placement) != replicas:
            raise ValueError(f"placement {tuple(placement)} does not hold {replicas} GPUs")
        measured = placement_max_local(profile, placement) if typed else None
        if measured is not None:
            largest = measured
    local = math.ceil(batch_size / replicas - EPS)
    accumulation = math.ceil(local / largest - EPS) - 1
    if replicas == 1 and batch_size > profile.init_batch:
        accumulation = max(1, accumulation)
    atomic = math.ceil(local / (accumulation + 1) - EPS)
    if typed:
        memory = replicas_max_local(profile, replicas)
        if memory is not None:
            atomic = min(atomic, memory)
    return _capped(profile, replicas, atomic, accumulation)


def placement_max_local(profile: AppProfile, placement: Sequence[int]) -> int | None:
    """The largest local batch ``profile`` measured on ``placement`` (GPUs per node), as
    Sia's ``Application.get_max_local_bsz``: that placement's curve in its smallest
    rotation (8 + 4 is ``48``) where ``profile.placements`` has it, else the largest over
    the ``profile.scalability`` curves of at least as many nodes and GPUs; None where
    neither has one (Sia's would fail there)."""
    shape = normalise(placement)
    if not shape:
        return None
    curve = profile.placements.get(int("".join(map(str, shape))))
    if curve is not None:
        return int(curve[0].max())
    nodes, replicas = len(shape), sum(shape)
    found = [
        int(local.max())
        for (n, r), (local, _, _) in profile.scalability.items()
        if n >= nodes and r >= replicas and len(local)
    ]
    return max(found, default=None)


def replicas_max_local(profile: AppProfile, replicas: int) -> int | None:
    """The largest local batch ``profile.placements`` measured on any placement of
    ``replicas`` GPUs (the sum of its id's digits, as Sia counts them); None where none
    has that many."""
    found = [
        int(local.max())
        for placement, (local, _, _) in profile.placements.items()
        if sum(int(d) for d in str(placement)) == replicas and len(local)
    ]
    return max(found, default=None)


def adaptive_batch(
    profile: AppProfile, nodes: int, replicas: int, model: GoodputModel | None
) -> BatchConfig:
    """The configuration of best goodput under ``model`` on ``nodes`` x ``replicas``; with
    no model yet, the smallest batch those replicas allow, split as a fixed one."""
    if model is None:
        smallest = max(profile.init_batch, profile.min_local_batch * replicas)
        return fixed_batch(profile, replicas, smallest)
    choice = model.optimize(nodes, replicas, limits(profile))
    return _capped(profile, replicas, int(choice.atomic_bsz), int(choice.accum_steps))


def _capped(profile: AppProfile, replicas: int, atomic: int, accumulation: int) -> BatchConfig:
    atomic = min(atomic, profile.max_batch // (replicas * (accumulation + 1)))
    return BatchConfig(replicas=replicas, atomic=atomic, accumulation=accumulation)
