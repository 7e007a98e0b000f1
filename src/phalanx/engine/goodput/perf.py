"""Pollux's throughput model: the time of one training iteration of data-parallel SGD.

Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI '21, section 3.2. An iteration of a job on ``nodes`` nodes and
``replicas`` GPUs (one replica each) runs ``accum_steps`` compute-only steps and then
one synchronising step, each step on ``atomic_bsz`` samples per replica. In seconds::

    T_accum(b)    = alpha_c + beta_c * b                       compute of one step
    T_net(n, r)   = alpha_n + beta_n * max(r - 2, 0)   if n > 1   inter-node all-reduce
                  = alpha_r + beta_r * max(r - 2, 0)   if n = 1, r > 1   intra-node
                  = 0                                  if r = 1   (Pollux: 1e-8)
    T_sync        = (T_accum ** gamma + T_net ** gamma) ** (1 / gamma)
    T_iter        = accum_steps * T_accum + T_sync
    throughput    = r * b * (accum_steps + 1) / T_iter         samples per second

``gamma`` in [1, 10] says how much compute and communication overlap: 1 adds them, 10
is close to their maximum. Every function is vectorised: arguments broadcast as numpy
arrays do, and each returns an array of the broadcast shape (float64).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: The network time of one replica, and the floor of ``r - 2``: Pollux's 1e-8, so that
#: logarithms stay finite.
TINY = 1e-8


@dataclass(frozen=True, slots=True, kw_only=True)
class PerfParams:
    """The seven parameters of the iteration-time model (seconds, seconds per sample,
    seconds per extra replica; ``gamma`` has no unit)."""

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float

    def as_array(self) -> NDArray[np.float64]:
        """The parameters in declaration order."""
        return np.array(
            [
                self.alpha_c,
                self.beta_c,
                self.alpha_n,
                self.beta_n,
                self.alpha_r,
                self.beta_r,
                self.gamma,
            ],
            dtype=np.float64,
        )

    @classmethod
    def from_array(cls, values: ArrayLike) -> PerfParams:
        """The parameters from seven numbers in declaration order."""
        v = [float(x) for x in np.asarray(values, dtype=np.float64).reshape(7)]
        return cls(
            alpha_c=v[0],
            beta_c=v[1],
            alpha_n=v[2],
            beta_n=v[3],
            alpha_r=v[4],
            beta_r=v[5],
            gamma=v[6],
        )


def accum_time(params: PerfParams, atomic_bsz: ArrayLike) -> NDArray[np.float64]:
    """Seconds of one compute-only step on ``atomic_bsz`` samples per replica."""
    return params.alpha_c + params.beta_c * np.asarray(atomic_bsz, dtype=np.float64)


def network_time(params: PerfParams, nodes: ArrayLike, replicas: ArrayLike) -> NDArray[np.float64]:
    """Seconds of the all-reduce of one iteration: the slowest link's constant plus a
    retrogression per replica beyond two."""
    n = np.asarray(nodes)
    r = np.asarray(replicas)
    inter, intra = n > 1, r > 1
    alpha = np.select([inter, intra], [params.alpha_n, params.alpha_r], TINY)
    beta = np.select([inter, intra], [params.beta_n, params.beta_r], TINY)
    result: NDArray[np.float64] = alpha + beta * np.maximum(r - 2.0, TINY)
    return result


def log_sync_time(
    gamma: float, accum: NDArray[np.float64], network: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Natural log of the synchronising step's seconds: the ``gamma``-norm of compute
    and network time, computed without overflow."""
    result: NDArray[np.float64] = np.logaddexp(gamma * np.log(accum), gamma * np.log(network))
    return result / gamma


def iteration_time(
    params: PerfParams,
    nodes: ArrayLike,
    replicas: ArrayLike,
    atomic_bsz: ArrayLike,
    accum_steps: ArrayLike,
) -> NDArray[np.float64]:
    """Seconds of one iteration (``accum_steps`` compute steps, then one synchronising
    step)."""
    accum = accum_time(params, atomic_bsz)
    network = network_time(params, nodes, replicas)
    # The power form: both terms are at most (seconds ** 10), far from overflow, and it
    # costs half the transcendental functions of the logarithmic one (a hot path).
    g = params.gamma
    sync = (accum**g + network**g) ** (1.0 / g)
    result: NDArray[np.float64] = np.asarray(accum_steps) * accum + sync
    return result


def throughput(
    params: PerfParams,
    nodes: ArrayLike,
    replicas: ArrayLike,
    atomic_bsz: ArrayLike,
    accum_steps: ArrayLike,
) -> NDArray[np.float64]:
    """Samples per second over all replicas."""
    batch = np.asarray(replicas) * np.asarray(atomic_bsz) * (np.asarray(accum_steps) + 1)
    result: NDArray[np.float64] = batch / iteration_time(
        params, nodes, replicas, atomic_bsz, accum_steps
    )
    return result
