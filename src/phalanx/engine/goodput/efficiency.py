"""Statistical efficiency from gradient statistics (Pollux, OSDI '21, section 3.1).

A job trained at batch size ``M`` instead of its initial ``M0`` makes, per sample,
``E(M) = (phi + M0) / (phi + M)`` of the progress, where ``phi = M0 * var / sqr`` is
the gradient noise scale measured at ``M0`` (``sqr`` the squared norm of the true
gradient, ``var`` the variance of one ``M0``-sample gradient). Written with the scale
``s = M / M0``::

    gain(M)       = (var + sqr) / (var / s + sqr)     progress of one iteration at M,
                                                      in iterations at M0 (1 when the
                                                      denominator is not positive)
    efficiency(M) = gain(M) / s                       in (0, 1] for M >= M0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True, slots=True, kw_only=True)
class GradParams:
    """Gradient statistics at the initial batch size: squared norm and variance."""

    sqr: float
    var: float


def gain(grad: GradParams, batch_size: ArrayLike, init_batch_size: float) -> NDArray[np.float64]:
    """Progress of one iteration at ``batch_size``, counted in iterations at
    ``init_batch_size``."""
    scale = np.asarray(batch_size, dtype=np.float64) / init_batch_size
    denom = grad.var / scale + grad.sqr
    safe = np.where(denom > 0, denom, 1.0)
    result: NDArray[np.float64] = np.where(denom > 0, (grad.var + grad.sqr) / safe, 1.0)
    return result


def efficiency(
    grad: GradParams, batch_size: ArrayLike, init_batch_size: float
) -> NDArray[np.float64]:
    """Progress per sample at ``batch_size`` relative to ``init_batch_size``."""
    scale = np.asarray(batch_size, dtype=np.float64) / init_batch_size
    result: NDArray[np.float64] = gain(grad, batch_size, init_batch_size) / scale
    return result
