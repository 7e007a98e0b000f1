"""The dependency rules of DESIGN.md §3, checked on every module's imports.

Each rule names a package, what it may not import, and why. A package that does not
exist yet simply has no modules to check.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "phalanx"

IO_AND_CLOCK = (
    "sqlalchemy",
    "fastapi",
    "httpx",
    "ray",
    "subprocess",
    "socket",
    "requests",
    "yaml",
    "pydantic",
    "time",
    "datetime",
    "random",
    "os",
    "pathlib",
    "threading",
    "asyncio",
    "uvicorn",
    "starlette",
)
UPPER_LAYERS = (
    "phalanx.spec",
    "phalanx.sim",
    "phalanx.control",
    "phalanx.executors",
    "phalanx.workflow",
    "phalanx.client",
    "phalanx.cli",
    "phalanx.web",
    "phalanx.benchmarks",
)


@dataclass(frozen=True)
class Rule:
    package: str
    forbidden: tuple[str, ...]
    why: str


RULES = (
    Rule("phalanx.domain", ("phalanx.engine", *UPPER_LAYERS), "domain is the bottom layer"),
    Rule("phalanx.domain", IO_AND_CLOCK, "domain does no I/O and never reads the clock"),
    Rule("phalanx.engine", UPPER_LAYERS, "the engine depends on domain only"),
    Rule("phalanx.engine", IO_AND_CLOCK, "the engine does no I/O; time arrives as `now`"),
    Rule(
        "phalanx.engine.framework",
        ("phalanx.engine.placement",),
        "the framework is the session, statement, extension points (with the values they "
        "carry: confinement, shares), plugin, registry and config; placement (with the "
        "room a confinement is offered on) and eviction are algorithms the actions use",
    ),
    Rule(
        "phalanx.engine.framework",
        (
            "phalanx.engine.actions",
            "phalanx.engine.plugins",
            "phalanx.engine.cycle",
            "phalanx.engine.state",
            "phalanx.engine.lifecycle",
        ),
        "the framework imports nothing above it, not even inside a function: the shipped "
        "actions and plugins import the framework, and the cycle registers them",
    ),
    Rule(
        "phalanx.engine.snapshot",
        (
            "phalanx.engine.framework",
            "phalanx.engine.actions",
            "phalanx.engine.plugins",
            "phalanx.engine.placement",
            "phalanx.engine.placement.eviction",
            "phalanx.engine.lifecycle",
            "phalanx.engine.cycle",
            "phalanx.engine.state",
        ),
        "the snapshot is the cluster's state: it knows no session, action, plugin or "
        "algorithm that reads it",
    ),
    Rule(
        "phalanx.engine.placement",
        ("phalanx.engine.actions", "phalanx.engine.plugins"),
        "placement (eviction included) serves the actions; it knows none of them",
    ),
    Rule(
        "phalanx.engine.plugins",
        ("phalanx.engine.actions",),
        "plugins are the nouns of a session: they know no action",
    ),
    Rule(
        "phalanx.engine.actions",
        ("phalanx.engine.plugins",),
        "an action reads what plugins give through the session (extension points, "
        "Session.shares), never a plugin's module",
    ),
    Rule(
        "phalanx.engine.goodput",
        (
            "phalanx.engine.framework",
            "phalanx.engine.placement",
            "phalanx.engine.placement.eviction",
            "phalanx.engine.actions",
            "phalanx.engine.plugins",
            "phalanx.engine.snapshot",
            "phalanx.engine.cycle",
        ),
        "the goodput model is arithmetic the scheduler uses; it knows no session or action",
    ),
    Rule(
        "phalanx.sim.elastic",
        (*IO_AND_CLOCK, "phalanx.sim.traces", "phalanx.sim.runner", "phalanx.sim.cluster"),
        "an elastic job's ground truth is pure: profiles are read by sim.traces and passed in",
    ),
    Rule(
        "phalanx.workflow",
        (
            "phalanx.engine",
            "phalanx.sim",
            "phalanx.control",
            "phalanx.executors",
            "phalanx.client",
            "phalanx.cli",
            "phalanx.web",
        ),
        "workflow depends on domain and spec only",
    ),
    Rule(
        "phalanx.spec",
        (
            "phalanx.workflow",
            "phalanx.wire",
            "phalanx.sim",
            "phalanx.control",
            "phalanx.executors",
            "phalanx.client",
            "phalanx.cli",
            "phalanx.web",
            "phalanx.benchmarks",
        ),
        "spec holds every document kind, the Pipeline too: workflow, the wire types and the "
        "faces build on the documents, never the reverse",
    ),
    Rule(
        "phalanx.wire",
        (
            "phalanx.control",
            "phalanx.client",
            "phalanx.engine",
            "phalanx.sim",
            "phalanx.executors",
            "phalanx.cli",
            "phalanx.web",
        ),
        "the wire types are the one contract of the server and the client: they know neither",
    ),
    Rule(
        "phalanx.client",
        (
            "phalanx.control",
            "phalanx.engine",
            "phalanx.sim",
            "phalanx.executors",
            "phalanx.cli",
            "phalanx.web",
            "phalanx.benchmarks",
        ),
        "the client reaches the server over HTTP with the wire types, never through the "
        "server's modules; the faces that use it are above it",
    ),
    Rule(
        "phalanx.tuning",
        (
            "phalanx.control",
            "phalanx.executors",
            "phalanx.engine",
            "phalanx.cli",
            "phalanx.web",
            "phalanx.sim",
            "phalanx.workflow",
        ),
        "the tuning library (load, space, search, objective) stands on domain alone: the "
        "tuning controller drives it, never the reverse",
    ),
    Rule(
        "phalanx.tenantfs",
        ("phalanx.engine", *UPPER_LAYERS),
        "paths a tenant controls are reached one way, below every layer that reads them",
    ),
    Rule(
        "phalanx.control.api",
        ("phalanx.engine",),
        "the API records intent; it never calls the engine",
    ),
    Rule(
        "phalanx.sim",
        (
            "phalanx.executors.local",
            "phalanx.executors.ray",
            "phalanx.executors.kubernetes",
            "phalanx.control",
        ),
        "the simulator depends on the Executor protocol only",
    ),
    Rule(
        "phalanx.control.controllers",
        ("phalanx.executors.local", "phalanx.executors.ray", "phalanx.executors.kubernetes"),
        "controllers depend on the Executor protocol only",
    ),
    Rule(
        "phalanx.web",
        ("phalanx.control", "phalanx.engine", "phalanx.sim"),
        "the web UI talks to the server",
    ),
)
# CLI command groups that run in-process by design (DESIGN.md §3); the rest go through the client.
IN_PROCESS_COMMANDS = {"sim", "story", "bench", "up", "demo", "gateway", "main", "__init__"}

#: The imports made inside a function on purpose: (importer, imported), each a module or
#: package, with the reason. Any other import inside a function is a dependency hidden from
#: the module's head, or a cycle by the back door: it belongs at the top.
FUNCTION_LOCAL_IMPORTS = {
    ("phalanx.executors.ray", "ray"): "Ray is an optional extra, imported where it is used",
    ("phalanx.benchmarks.raycluster", "ray"): "Ray is an optional extra",
    ("phalanx.control.server", "phalanx.executors.ray"): "Ray loads only for a Ray address",
    ("phalanx.telemetry.nvml", "pynvml"): "NVML loads on a node that reads its GPUs alone",
    ("phalanx.examples", "torch"): "torch is optional: only the example tasks use it",
    ("phalanx.runtimes", "torch"): "torch is optional: only the serving runtime uses it",
    ("phalanx.spec.scheduler", "phalanx.engine"): "documents load without the engine",
    ("phalanx.cli.up", "phalanx"): "the server's stack loads for `up` alone: the CLI starts fast",
    ("phalanx.cli.demo", "phalanx"): "the same, for `demo`",
    ("phalanx.cli.gateway", "phalanx"): "the same, for `gateway`",
    ("phalanx.cli.bench", "phalanx.benchmarks"): "the benchmarks load when one is run",
    ("phalanx.cli.sim", "phalanx.sim.report"): "the HTML report loads when one is asked for",
    ("phalanx.cli.version", "phalanx.client"): "--version answers before the client loads",
    ("phalanx.client", "phalanx.client._documents"): "every document model loads when a "
    "document is first applied: a command that only reads the API starts fast",
    ("phalanx.client", "phalanx.client._unchanged"): "the same, for comparing applied ones",
}


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, path))
    return found


def _imports(path: Path, module: str, *, runtime_only: bool = False) -> set[str]:
    """Every module ``module`` imports (at any depth); ``runtime_only``: not those under
    ``if TYPE_CHECKING:``, which only type checkers read."""
    tree = ast.parse(path.read_text(), filename=str(path))
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            ):
                node.body = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return {name for node in ast.walk(tree) for name in _named(node, package)}


def _named(node: ast.AST, package: str) -> set[str]:
    """What one node imports, absolute (``from x import y`` gives ``x`` and ``x.y``): every
    Import and ImportFrom node counts, at the top, in a function or under a condition."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if isinstance(node, ast.ImportFrom):
        base = _from(node, package)
        return {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return set()


def _from(node: ast.ImportFrom, package: str) -> str:
    """The module ``from ... import`` reads, absolute."""
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base]) if base else ".".join(anchor)
    return base


def _imported_in_functions(path: Path, module: str) -> set[str]:
    """The modules ``module`` imports inside a function or method body (``from x import
    y`` gives ``x``, the module that the call imports)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    found.add(_from(node, package))
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


MODULES = _modules()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.package}: {r.why}")
def test_dependency_rule(rule: Rule) -> None:
    violations = [
        f"{module} imports {name}"
        for module, path in MODULES
        if _within(module, rule.package)
        for name in sorted(_imports(path, module))
        if any(_within(name, banned) for banned in rule.forbidden)
    ]
    assert not violations, f"{rule.why}:\n" + "\n".join(violations)


def test_actions_depend_on_the_framework_and_eviction_not_on_each_other() -> None:
    violations = [
        f"{module} imports {name}"
        for module, path in MODULES
        if _within(module, "phalanx.engine.actions") and module != "phalanx.engine.actions"
        for name in sorted(_imports(path, module))
        if _within(name, "phalanx.engine.actions") and not _within(name, module)
    ]
    assert not violations, "\n".join(violations)


def test_placing_knows_nothing_of_evicting() -> None:
    """Eviction (``placement.eviction``) makes room and then places; placing never evicts."""
    eviction = "phalanx.engine.placement.eviction"
    violations = [
        f"{module} imports {name}"
        for module, path in MODULES
        if _within(module, "phalanx.engine.placement") and not _within(module, eviction)
        for name in sorted(_imports(path, module))
        if _within(name, eviction)
    ]
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize(
    "package",
    [
        "phalanx.engine.placement",
        "phalanx.engine.placement.eviction",
        "phalanx.engine.snapshot",
    ],
)
def test_the_algorithm_packages_import_no_module_in_a_cycle(package: str) -> None:
    inside = {module: path for module, path in MODULES if _within(module, package)}
    edges = {
        module: {
            name
            for name in _imports(path, module, runtime_only=True)
            if name in inside and name != module
        }
        for module, path in inside.items()
    }
    cycle = _cycle(edges)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_control_planes_parts_import_each_other_in_no_cycle() -> None:
    """api, controllers, store, submit, metrics ...: each part of ``phalanx.control`` is a
    layer over the parts it imports at run time (type-only imports are left out: the
    metrics read the controller's view type, which the controller's metrics give)."""
    edges: dict[str, set[str]] = {}
    for module, path in MODULES:
        if not _within(module, "phalanx.control"):
            continue
        part = ".".join(module.split(".")[:3])
        for name in _imports(path, module, runtime_only=True):
            other = ".".join(name.split(".")[:3])
            if _within(name, "phalanx.control") and other not in (part, "phalanx.control"):
                edges.setdefault(part, set()).add(other)
    cycle = _cycle(edges)
    assert not cycle, "import cycle among the control plane's parts: " + " -> ".join(cycle)


def _cycle(edges: dict[str, set[str]]) -> list[str]:
    """One cycle of ``edges`` (its first node repeated at its end), or none."""
    done: set[str] = set()

    def walk(node: str, path: tuple[str, ...]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        for name in sorted(edges.get(node, ())):
            found = walk(name, (*path, node))
            if found:
                return found
        done.add(node)
        return []

    for node in sorted(edges):
        found = walk(node, ())
        if found:
            return found
    return []


def _top(name: str) -> str:
    """The top-level package (or module) of phalanx that ``name`` is in."""
    return ".".join(name.split(".")[:2])


def test_the_top_level_packages_import_each_other_in_no_cycle() -> None:
    """domain, engine, spec, workflow, wire, control, client, web ...: each is a layer over
    the ones it imports. Every import counts: type-only ones and those inside functions."""
    edges: dict[str, set[str]] = {}
    for module, path in MODULES:
        for name in _imports(path, module):
            if (
                "." in module
                and _within(name, "phalanx")
                and _top(name) not in ("phalanx", _top(module))
            ):
                edges.setdefault(_top(module), set()).add(_top(name))
    cycle = _cycle(edges)
    assert not cycle, "import cycle among the top-level packages: " + " -> ".join(cycle)


def test_imports_inside_functions_are_deliberate() -> None:
    violations = [
        f"{module} imports {name} inside a function"
        for module, path in MODULES
        for name in sorted(_imported_in_functions(path, module))
        if not any(_within(module, m) and _within(name, n) for m, n in FUNCTION_LOCAL_IMPORTS)
    ]
    assert not violations, (
        "import these at the module's top, or name them in FUNCTION_LOCAL_IMPORTS with the "
        "reason:\n" + "\n".join(violations)
    )


@pytest.mark.parametrize("allowed", sorted(FUNCTION_LOCAL_IMPORTS), ids=" imports ".join)
def test_every_allowed_function_local_import_is_still_made(allowed: tuple[str, str]) -> None:
    importer, imported = allowed
    assert any(
        _within(name, imported)
        for module, path in MODULES
        if _within(module, importer)
        for name in _imported_in_functions(path, module)
    ), f"{importer} no longer imports {imported} inside a function: strike it from the list"


def test_the_checker_sees_imports_inside_functions(tmp_path: Path) -> None:
    """The rules read every import, also one in a function body (``Registry.builtin()``
    once imported the actions and plugins inside a method)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import numpy\n"
        "def build():\n"
        "    from phalanx.engine.actions import BUILTIN_ACTIONS\n"
        "class Holder:\n"
        "    async def load(self):\n"
        "        import ray.util\n"
    )
    module = "phalanx.engine.framework.probe"
    assert {"numpy", "phalanx.engine.actions", "ray.util"} <= _imports(probe, module)
    assert _imported_in_functions(probe, module) == {"phalanx.engine.actions", "ray.util"}


#: What framework/ holds: the session and what it is made of. A new module there is a
#: decision (an algorithm belongs in placement/ or eviction/), not a default.
FRAMEWORK_MODULES = {
    "session",
    "statement",
    "extension",
    "confinement",  # the confinement point's values
    "shares",  # the queue shares a session publishes
    "plugin",
    "registry",
    "config",
    "kept",  # what outlives a cycle
    "scores",  # the node_score point's kept class scores
    "wording",  # how a session's reasons name amounts
    "ordering",  # the lazily re-keyed queue of the order points
}


def test_the_framework_holds_the_framework_only() -> None:
    found = {
        module.rsplit(".", 1)[-1]
        for module, _ in MODULES
        if _within(module, "phalanx.engine.framework") and module != "phalanx.engine.framework"
    }
    assert found == FRAMEWORK_MODULES


def test_domain_means_the_domain_model_only() -> None:
    """``phalanx.domain`` is the domain model; the engine says "confinement" for where a
    plugin keeps a gang, so no engine module, class or function is named for a domain."""
    named = [
        f"{module}: {node.name}" if isinstance(node, ast.ClassDef | ast.FunctionDef) else module
        for module, path in MODULES
        if _within(module, "phalanx.engine")
        for node in [None, *ast.walk(ast.parse(path.read_text()))]
        if (node is None and "domain" in module.rsplit(".", 1)[-1])
        or (
            isinstance(node, ast.ClassDef | ast.FunctionDef)
            and "domain" in node.name.lower()
            and "numa" not in node.name.lower()
        )
    ]
    assert not named


def test_cli_reaches_the_server_through_the_client_only() -> None:
    violations = [
        f"{module} imports {name}"
        for module, path in MODULES
        if _within(module, "phalanx.cli") and module.rsplit(".", 1)[-1] not in IN_PROCESS_COMMANDS
        for name in sorted(_imports(path, module))
        if any(_within(name, p) for p in ("phalanx.control", "phalanx.engine", "phalanx.sim"))
    ]
    assert not violations, "\n".join(violations)


def test_the_checker_sees_imports() -> None:
    engine_imports = set().union(
        *(_imports(p, m) for m, p in MODULES if _within(m, "phalanx.engine"))
    )
    assert "numpy" in engine_imports and "phalanx.domain.resources" in engine_imports


def _attributes(path: Path) -> set[str]:
    """Every attribute name the module reads or writes (``x.core`` gives ``core``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}


def test_the_api_reads_the_controllers_published_view_never_its_core() -> None:
    """The controller's ``core`` is its working state, changed under its lock each tick;
    the API reads the published ``view`` (and the executor through ``Controller.logs``)."""
    api = [(module, path) for module, path in MODULES if _within(module, "phalanx.control.api")]
    violations = [module for module, path in api if "core" in _attributes(path)]
    assert not violations, "these API modules reach into controller.core:\n" + "\n".join(violations)
    # the check sees attribute reads: the API does read the view
    assert any("view" in _attributes(path) for _, path in api)


#: The store layer: the only package that writes SQL (one module per kind of row).
STORE = "phalanx.control.store"


def _sql_outside_the_store() -> list[str]:
    return [
        f"{module} imports {name}"
        for module, path in MODULES
        if not _within(module, STORE)
        for name in sorted(_imports(path, module) | _imported_in_functions(path, module))
        if _within(name, "sqlalchemy") or _within(name, "alembic")
    ]


def test_no_module_outside_the_store_writes_sql() -> None:
    """Queries live in ``control/store`` (one module per kind: jobs, cluster, runs,
    users, cache, journal): the API and the controllers call them, with the store's
    ``Session``, and a new kind adds a module there and nowhere else."""
    assert not _sql_outside_the_store(), "\n".join(_sql_outside_the_store())


def test_the_store_rule_sees_a_planted_query(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from sqlalchemy import select\n    return select\n")
    monkeypatch.setattr(
        sys.modules[__name__], "MODULES", [*MODULES, ("phalanx.control.api.x", planted)]
    )
    found = _sql_outside_the_store()
    assert found and all(v.startswith("phalanx.control.api.x imports sqlalchemy") for v in found)
