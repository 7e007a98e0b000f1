"""Actions: the verbs of a session, one module each."""

from phalanx.engine.actions.allocate import AllocateAction
from phalanx.engine.actions.backfill import BackfillAction
from phalanx.engine.actions.elastic import ElasticAction
from phalanx.engine.actions.enqueue import EnqueueAction
from phalanx.engine.actions.preempt import PreemptAction
from phalanx.engine.actions.reclaim import ReclaimAction
from phalanx.engine.framework.plugin import Action

BUILTIN_ACTIONS: tuple[type[Action], ...] = (
    EnqueueAction,
    AllocateAction,
    ReclaimAction,
    PreemptAction,
    BackfillAction,
    ElasticAction,
)

__all__ = ["BUILTIN_ACTIONS"]
