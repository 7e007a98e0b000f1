"""The plugin registry drivers use: phalanx's own plugins plus installed third-party ones.

A third-party package exposes a ``phalanx.engine.framework.plugin.Plugin`` subclass in
the ``phalanx.plugins`` entry-point group, for example in its pyproject.toml::

    [project.entry-points."phalanx.plugins"]
    gpu-age = "acme_phalanx.age:GpuAgePlugin"

A name that clashes with a shipped plugin, or an entry that fails to load, is refused
with a PluginError naming it.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from phalanx.engine.framework.registry import ENTRY_POINT_GROUP, Registry


def installed_registry() -> Registry:
    """Shipped plugins and actions, plus every plugin installed under the entry-point group."""
    return Registry.builtin().with_entry_points(entry_points(group=ENTRY_POINT_GROUP))
