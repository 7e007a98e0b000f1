"""The plugin registry drivers use: phalanx's own plugins plus installed third-party ones.

A third-party package exposes a ``phalanx.engine.framework.plugin.Plugin`` subclass in
the ``phalanx.plugins`` entry-point group, for example in its pyproject.toml::

    [project.entry-points."phalanx.plugins"]
    gpu-age = "acme_phalanx.age:GpuAgePlugin"

A name that clashes with a shipped plugin, or an entry that fails to load, is refused
with a PluginError naming it.

The class provides the extension points it defines methods for, named after the points
(``framework.extension.Points``), each taking first the state ``open`` returns for the
session; options are class attributes (see ``Plugin``)::

    class GpuAgePlugin(Plugin[float]):  # its per-session state: the session's time
        name = "gpu-age"
        accepted_args = frozenset({"weight"})  # the score's weight (else default_weight)
        judges_each = True  # its preemptable judges each candidate on its own

        def open(self, session: Session) -> float:
            return session.now  # never kept on self: one instance serves many sessions

        def job_order(self, state: float, job: JobInfo) -> float:
            return job.creation_time  # oldest first

        def preemptable(self, state, preemptor, candidates):
            return [t for t in candidates if state - (t.start_time or state) < 600]

        def node_score(self, state, task, nodes):
            return ...  # 0..100 per candidate node

``skipped(state)`` names points the plugin does without in one session.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from phalanx.engine.cycle import builtin_registry
from phalanx.engine.framework.registry import ENTRY_POINT_GROUP, Registry


def installed_registry() -> Registry:
    """Shipped plugins and actions, plus every plugin installed under the entry-point group."""
    return builtin_registry().with_entry_points(entry_points(group=ENTRY_POINT_GROUP))
