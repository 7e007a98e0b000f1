"""The true step time of a job on a placement, from its application profile.

As Pollux's simulator (``Application.get_throughput``) reads it: a placement (GPUs per
node, in any order) is normalised to its smallest rotation and looked up in
``placements.csv``; its step and sync seconds are linear in the local batch between the
measured ones. A placement not measured falls back to its shape (nodes, replicas), node
count capped at 16: the mean of the measured placements of that shape, or
``scalability.csv``'s row.

A shape measured by neither file is interpolated (``step_times(..., interpolate=True)``):
linearly in the node count between the nearest measured node counts below and above,
each at the same GPUs per node, and within a node count linearly in replicas between
the nearest measured ones (extended linearly in the local batch where a measured
shape's curve stops short: a shape with more replicas is measured only up to the
largest batch). Pollux interpolates the same points with a 3-D Delaunay
triangulation (scipy's ``LinearNDInterpolator``), which phalanx does without; the two
agree exactly where a shape is measured; between, on the real profiles' shapes of 5 to
16 nodes at batches a job can run, they agree within 5% at 67 of 73 points tested and
differ by up to 28% (tests/unit/sim/elastic). With ``interpolate``, a measured shape
whose curve stops short of a local batch is extended linearly too (Sia's per-type
profiles measure large shapes only up to the batch their largest total allows).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from phalanx.sim.elastic.profile import AppProfile, Curve

#: Node counts above this are read as this many (Pollux's profiles stop at 16 nodes).
MAX_NODES = 16


def normalise(placement: Sequence[int]) -> tuple[int, ...]:
    """GPUs per node without empty nodes, rotated to the smallest sequence."""
    used = tuple(int(g) for g in placement if g)
    if not used:
        return ()
    return min(used[i:] + used[:i] for i in range(len(used)))


def packed(replicas: int, per_node: int) -> tuple[int, ...]:
    """``replicas`` GPUs packed ``per_node`` to a node (the last node takes the rest)."""
    full, rest = divmod(replicas, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def step_times(
    profile: AppProfile, placement: Sequence[int], atomic: float, *, interpolate: bool = False
) -> tuple[float, float] | None:
    """(step, sync) seconds of one synchronising step of ``atomic`` samples per replica on
    ``placement``; the compute part is ``step - sync``. None when the profile does not
    measure that placement's shape (or, with ``interpolate``, cannot bracket it) or that
    local batch (with ``interpolate``: a measured curve is extended past its ends)."""
    shape = normalise(placement)
    if not shape:
        return None
    curve = profile.placements.get(int("".join(map(str, shape))))
    if curve is None:
        curve = profile.shapes.get((min(len(shape), MAX_NODES), sum(shape)))
    if curve is not None:
        found = _at(curve, atomic)
        return found if found is not None or not interpolate else _past_ends(curve, atomic)
    if not interpolate:
        return None
    return _between_shapes(profile, min(len(shape), MAX_NODES), sum(shape), atomic)


def iteration_seconds(
    profile: AppProfile,
    placement: Sequence[int],
    atomic: float,
    accumulation: int,
    *,
    interpolate: bool = False,
) -> float | None:
    """Seconds of one iteration: ``accumulation`` compute-only steps, then one
    synchronising step (None as for ``step_times``)."""
    times = step_times(profile, placement, atomic, interpolate=interpolate)
    if times is None:
        return None
    step, sync = times
    return step + accumulation * (step - sync)


def _at(curve: Curve, atomic: float, *, extend: bool = False) -> tuple[float, float] | None:
    """The curve's (step, sync) at ``atomic``: linear between its points; beyond its
    ends, None, or with ``extend`` the line through its two nearest points."""
    local, step, sync = curve
    if local[0] <= atomic <= local[-1]:
        return float(np.interp(atomic, local, step)), float(np.interp(atomic, local, sync))
    if not extend or len(local) < 2:
        return None
    i = 0 if atomic < local[0] else len(local) - 2
    share = (atomic - local[i]) / (local[i + 1] - local[i])
    return (
        float(step[i] + share * (step[i + 1] - step[i])),
        float(sync[i] + share * (sync[i + 1] - sync[i])),
    )


def _past_ends(curve: Curve, atomic: float) -> tuple[float, float] | None:
    """The curve extended to ``atomic`` (``_at``), its sync kept within 0 and the step,
    its step above 0."""
    found = _at(curve, atomic, extend=True)
    if found is None:
        return None
    step = max(found[0], float(np.min(curve[1])) * 1e-3)
    return step, min(max(found[1], 0.0), step)


def _between_shapes(
    profile: AppProfile, nodes: int, replicas: int, atomic: float
) -> tuple[float, float] | None:
    counts = sorted({n for n, _ in profile.shapes})
    below = [n for n in counts if n <= nodes]
    above = [n for n in counts if n >= nodes]
    if not below or not above:
        return None
    low, high = below[-1], above[0]
    density = replicas / nodes
    first = _within_nodes(profile, low, density * low, atomic)
    second = _within_nodes(profile, high, density * high, atomic)
    return _mix(first, second, 0.0 if high == low else (nodes - low) / (high - low))


def _within_nodes(
    profile: AppProfile, nodes: int, replicas: float, atomic: float
) -> tuple[float, float] | None:
    """Step and sync seconds at ``nodes`` nodes and a (possibly fractional) replica count,
    linear between the nearest measured replica counts of that node count."""
    measured = sorted(r for n, r in profile.shapes if n == nodes)
    below = [r for r in measured if r <= replicas + 1e-9]
    above = [r for r in measured if r >= replicas - 1e-9]
    if not below or not above:
        return None
    low, high = below[-1], above[0]
    first = _at(profile.shapes[nodes, low], atomic, extend=True)
    second = _at(profile.shapes[nodes, high], atomic, extend=True)
    return _mix(first, second, 0.0 if high == low else (replicas - low) / (high - low))


def _mix(
    first: tuple[float, float] | None, second: tuple[float, float] | None, share: float
) -> tuple[float, float] | None:
    """``first`` and ``second`` mixed ``1 - share`` to ``share``; None if either is."""
    if first is None or second is None:
        return None
    return (
        (1 - share) * first[0] + share * second[0],
        (1 - share) * first[1] + share * second[1],
    )
