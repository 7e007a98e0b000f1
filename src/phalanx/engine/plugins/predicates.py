"""predicates: node selectors, required node affinity, taints and tolerations, cordons,
and container runtimes (a role with an ``image`` goes only to nodes labelled
``phalanx.io/container-runtime``).

Resource fit and the per-node task limit are checked by the framework for every
placement and cannot be switched off; this plugin adds the label and taint filters.
Masks are computed once per distinct (selector, affinity, tolerations) per session,
vectorized over all nodes; callers must not modify them. A PreferNoSchedule taint
that a task does not tolerate is not a filter but a score that outweighs the
placement scorers: such a node is used only when no other node fits.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.job import SelectorOperator
from phalanx.domain.node import CONTAINER_RUNTIME_LABEL, Taint, TaintEffect
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin, ScorePromises
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import RoleInfo, Snapshot, TaskInfo

_HARD = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)
#: Weight of the soft-taint score: far above binpack/spread (0..100 times their weight).
SOFT_TAINT_WEIGHT = 1000.0


class _Masks:
    """One session's hard taints, soft taints and masks per role signature."""

    def __init__(self, session: Session) -> None:
        self.snapshot = session.snapshot
        self.taints = session.kept.get(_taint_masks, Lifetime.FIXED)
        self.soft = session.kept.get(
            _taint_masks, Lifetime.FIXED, (TaintEffect.PREFER_NO_SCHEDULE,)
        )
        self.masks: dict[tuple[object, ...], NDArray[np.bool_]] = {}


class PredicatesPlugin(Plugin[_Masks]):
    """Filters nodes by labels and taints; scores nodes by soft taints when any node has one."""

    name = "predicates"
    default_weight = SOFT_TAINT_WEIGHT
    # constant per node: never drops as the node fills; by the role's tolerations only
    promises = ScorePromises(fills=True, per_class=True)

    def open(self, session: Session) -> _Masks:
        return _Masks(session)

    def skipped(self, state: _Masks) -> tuple[str, ...]:
        """No soft-taint score where no node has a soft taint."""
        return () if state.soft else ("node_score",)

    def predicate(self, state: _Masks, role: RoleInfo) -> NDArray[np.bool_]:
        spec = role.spec
        signature = (
            tuple(sorted(spec.node_selector.items())),
            spec.affinity,
            spec.tolerations,
            spec.image is not None,
        )
        mask = state.masks.get(signature)
        if mask is None:
            mask = state.masks[signature] = _mask(state.snapshot, state.taints, role)
        return mask

    def node_score(
        self, state: _Masks, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        return _untainted_score(state.soft, task.role, nodes)

    def score_ahead(
        self, state: _Masks, task: TaskInfo, node: int, count: int
    ) -> NDArray[np.float64]:
        return _untainted_score(state.soft, task.role, np.full(count, node, dtype=np.intp))


def _untainted_score(
    soft: dict[Taint, NDArray[np.bool_]], role: RoleInfo, nodes: NDArray[np.intp]
) -> NDArray[np.float64]:
    """100 on nodes without a soft taint the role does not tolerate, else 0."""
    avoid = np.zeros(len(nodes), dtype=np.bool_)
    for taint, tainted in soft.items():
        if not any(t.tolerates(taint) for t in role.spec.tolerations):
            avoid |= tainted[nodes]
    return np.where(avoid, 0.0, 100.0)


def _taint_masks(
    snapshot: Snapshot, effects: tuple[TaintEffect, ...] = _HARD
) -> dict[Taint, NDArray[np.bool_]]:
    masks: dict[Taint, NDArray[np.bool_]] = {}
    for i, node in enumerate(snapshot.nodes):
        for taint in node.taints:
            if taint.effect in effects:
                mask = masks.get(taint)
                if mask is None:
                    mask = masks[taint] = np.zeros(len(snapshot.nodes), dtype=np.bool_)
                mask[i] = True
    return masks


def _mask(
    snapshot: Snapshot, taints: dict[Taint, NDArray[np.bool_]], role: RoleInfo
) -> NDArray[np.bool_]:
    spec = role.spec
    mask = np.ones(len(snapshot.nodes), dtype=np.bool_)
    if spec.image is not None:  # only a node with a container runtime can run an image
        mask &= snapshot.label_column(CONTAINER_RUNTIME_LABEL) != None  # noqa: E711
    for key, value in sorted(spec.node_selector.items()):
        mask &= snapshot.label_column(key) == value
    for term in spec.affinity:
        column = snapshot.label_column(term.key)
        match term.operator:
            case SelectorOperator.IN:
                mask &= np.isin(column, list(term.values))
            case SelectorOperator.NOT_IN:
                mask &= ~np.isin(column, list(term.values))
            case SelectorOperator.EXISTS:
                mask &= column != None  # noqa: E711  (elementwise)
            case SelectorOperator.DOES_NOT_EXIST:
                mask &= column == None  # noqa: E711  (elementwise)
            case SelectorOperator.GT | SelectorOperator.LT:
                mask &= np.array(
                    [term.matches({term.key: v}) if v is not None else False for v in column]
                )
    for taint, tainted in taints.items():
        if not any(t.tolerates(taint) for t in spec.tolerations):
            mask &= ~tainted
    return mask
