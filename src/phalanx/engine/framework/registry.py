"""Plugin and action registries: values passed in, refusing duplicate names.

Third-party plugins are classes exposed in the ``phalanx.plugins`` entry-point group;
``builtin_registry().with_entry_points(entries)`` adds them (the caller reads the
entry points, so the engine itself does no I/O). The shipped plugins and actions are
registered by ``phalanx.engine.cycle.builtin_registry``: the framework knows none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.framework.extension import EXTENSION_POINTS
from phalanx.engine.framework.plugin import Action, Plugin

ENTRY_POINT_GROUP = "phalanx.plugins"


class LoadableEntry(Protocol):
    """What ``importlib.metadata.EntryPoint`` offers."""

    name: str

    def load(self) -> Any: ...


class Registry:
    """Name -> plugin class and name -> action class. Immutable once built."""

    def __init__(
        self,
        plugins: Mapping[str, type[Plugin[Any]]] | None = None,
        actions: Mapping[str, type[Action]] | None = None,
    ) -> None:
        self._plugins: dict[str, type[Plugin[Any]]] = dict(plugins or {})
        self._actions: dict[str, type[Action]] = dict(actions or {})

    @staticmethod
    def of(plugins: Iterable[type[Plugin[Any]]], actions: Iterable[type[Action]]) -> Registry:
        """Build from classes, refusing two with one name."""
        registry = Registry()
        for plugin in plugins:
            registry = registry.with_plugin(plugin)
        for action in actions:
            registry = registry.with_action(action)
        return registry

    def with_plugin(self, plugin: type[Plugin[Any]]) -> Registry:
        """A new registry that also knows ``plugin``."""
        if not plugin.name:
            raise PluginError(f"{plugin.__qualname__} has no name")
        if plugin.name in self._plugins:
            raise PluginError(f"a plugin named {plugin.name!r} is already registered")
        return Registry({**self._plugins, plugin.name: plugin}, self._actions)

    def with_action(self, action: type[Action]) -> Registry:
        """A new registry that also knows ``action``."""
        if not action.name:
            raise PluginError(f"{action.__qualname__} has no name")
        if action.name in self._actions:
            raise PluginError(f"an action named {action.name!r} is already registered")
        return Registry(self._plugins, {**self._actions, action.name: action})

    def with_entry_points(self, entries: Iterable[LoadableEntry]) -> Registry:
        """Add the plugin classes that ``entries`` load to; broken entries are refused by name."""
        registry = self
        for entry in sorted(entries, key=lambda e: e.name):
            try:
                loaded = entry.load()
            except Exception as error:  # a third party's import error, reported by name
                raise PluginError(f"entry point {entry.name!r} failed to load: {error}") from error
            if not (isinstance(loaded, type) and issubclass(loaded, Plugin)):
                raise PluginError(f"entry point {entry.name!r} is not a phalanx Plugin class")
            registry = registry.with_plugin(loaded)
        return registry

    def plugin(self, name: str, args: Mapping[str, Any]) -> Plugin[Any]:
        """A fresh instance of plugin ``name``."""
        cls = self._plugins.get(name)
        if cls is None:
            raise PluginError(f"unknown plugin {name!r}; known: {', '.join(sorted(self._plugins))}")
        return cls(args)

    def action(self, name: str, args: Mapping[str, Any]) -> Action:
        """A fresh instance of action ``name``."""
        cls = self._actions.get(name)
        if cls is None:
            raise PluginError(f"unknown action {name!r}; known: {', '.join(sorted(self._actions))}")
        return cls(args)

    def check(self, config: SchedulerConfig) -> None:
        """Refuse a config naming unknown actions or plugins, or giving a plugin bad args.

        Instantiates every action and plugin once, so argument errors surface before
        the first session rather than in it.
        """
        for action in config.actions:
            self.action(action.name, action.args)
        for tier in config.tiers:
            for plugin in tier:
                self.plugin(plugin.name, plugin.args)
                unknown = plugin.disabled - EXTENSION_POINTS
                if unknown:
                    raise PluginError(
                        f"plugin {plugin.name!r} disables unknown extension points "
                        f"{', '.join(sorted(unknown))}; known: {', '.join(sorted(EXTENSION_POINTS))}"
                    )

    @property
    def plugin_names(self) -> tuple[str, ...]:
        """Known plugin names, sorted."""
        return tuple(sorted(self._plugins))

    @property
    def action_names(self) -> tuple[str, ...]:
        """Known action names, sorted."""
        return tuple(sorted(self._actions))
