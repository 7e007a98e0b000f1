"""Installed third-party plugins are found through the entry-point group and run in a session."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import pytest

from phalanx.domain.errors import PluginError
from phalanx.engine import SchedulerConfig, Snapshot, run_cycle
from phalanx.plugins import installed_registry
from tests.builders import make_job, make_nodes, make_queue

PLUGIN = '''
import numpy as np
from phalanx.engine.framework.plugin import Plugin

class LastNodePlugin(Plugin[None]):
    """Prefers the node with the highest index (a visible, testable choice)."""
    name = "last-node"

    def open(self, session):
        return None

    def node_score(self, state, task, nodes):
        return nodes.astype(float)
'''


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, target: str) -> None:
    """Make a real distribution with an entry point visible to importlib.metadata."""
    (tmp_path / "acme_plugins.py").write_text(textwrap.dedent(PLUGIN))
    dist = tmp_path / "acme_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[phalanx.plugins]\n{name} = {target}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()


def test_an_installed_plugin_is_discovered_and_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(tmp_path, monkeypatch, "last-node", "acme_plugins:LastNodePlugin")
    registry = installed_registry()
    assert "last-node" in registry.plugin_names
    config = SchedulerConfig.build(["allocate"], [["gang", "predicates", "last-node"]])
    snapshot = Snapshot.build(nodes=make_nodes(3), queues=[make_queue()], jobs=[make_job("a")])
    decisions = run_cycle(snapshot, config, now=0.0, registry=registry)
    assert [b.node for b in decisions.binds] == ["n2"]
    sys.modules.pop("acme_plugins", None)


def test_a_clashing_plugin_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(tmp_path, monkeypatch, "gang", "phalanx.engine.plugins.gang:GangPlugin")
    with pytest.raises(PluginError, match="gang"):
        installed_registry()
