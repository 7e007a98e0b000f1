"""How a job splits its batch over its replicas (Pollux's ``Job.update_local_bsz``).

A job of ``replicas`` GPUs runs, per iteration, ``accumulation + 1`` steps of
``atomic`` samples on each replica. With a fixed total batch (a trace row's) the local
batch ``ceil(batch / replicas)`` is cut into steps of at most the profile's largest
local batch, and a single replica above the smallest profiled batch accumulates at
least once. With an adaptive batch the goodput model picks the configuration (until
the job has a model, it runs at the smallest batch its replicas allow). Either way the
step is capped so the total stays within the largest profiled batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from phalanx.engine.goodput import BatchLimits, GoodputModel
from phalanx.sim.elastic.profile import AppProfile

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


def fixed_batch(profile: AppProfile, replicas: int, batch_size: int) -> BatchConfig:
    """Pollux's split of a fixed ``batch_size`` over ``replicas``."""
    local = math.ceil(batch_size / replicas - EPS)
    accumulation = math.ceil(local / profile.max_local_batch - EPS) - 1
    if replicas == 1 and batch_size > profile.init_batch:
        accumulation = max(1, accumulation)
    atomic = math.ceil(local / (accumulation + 1) - EPS)
    return _capped(profile, replicas, atomic, accumulation)


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
