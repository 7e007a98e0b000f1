"""Running pipelines of jobs: the run planner, its state, cache keys, artifacts, the DSL.

The ``Pipeline`` document and its graph are ``phalanx.spec.pipeline``'s; this package
runs them. Pure: nothing here starts a process, reads the clock or keeps state between
calls (the cache and artifact helpers read files through fsspec when asked to). The
workflow controller drives it::

    [pipeline] = load_pipelines(text)                  # spec.loader: DocumentError naming the field
    graph = build_graph(pipeline.spec)                 # spec.pipeline.dag: resolved steps, order
    params = resolve(pipeline.spec.declared_params(), parse_assignments(["lr=0.1"]))
    state = RunState(params=params, run_id="r1")
    p = plan(graph, state)                             # planner: expand, start, settle, stop
    for start in p.start:
        node = graph.node(start.unit.step)
        context = unit_context(graph, state, start,
                               outputs=workspace.outputs("r1", start.unit, node))
        pinned, waiting = pins(node, listings, user="ann")   # workflow.datasets
        job = job_spec(node, context, unit=str(start.unit), datasets=pinned)   # or, cached:
        key = key_material(graph, node, context, content=..., files=..., datasets=pinned).key()

Each module's docstring states what it guarantees.
"""

from phalanx.workflow.artifacts import OutputError, Workspace, read_output_param, read_outputs
from phalanx.workflow.cache import (
    CACHE_VERSION,
    CacheEntry,
    KeyMaterial,
    artifact_references,
    key_material,
    servable,
)
from phalanx.workflow.contents import MissingContent, content_hash
from phalanx.workflow.dsl import ITEM, RUN_ID, PipelineBuilder, item_key
from phalanx.workflow.jobs import job_name, job_spec, unit_context
from phalanx.workflow.planner import (
    Phase,
    Plan,
    RunPhase,
    RunState,
    Settle,
    Start,
    Unit,
    apply,
    check_transition,
    plan,
    step_outputs,
    step_phase,
)
from phalanx.workflow.resume import resume_state

__all__ = [
    "CACHE_VERSION",
    "ITEM",
    "RUN_ID",
    "CacheEntry",
    "KeyMaterial",
    "MissingContent",
    "OutputError",
    "Phase",
    "PipelineBuilder",
    "Plan",
    "RunPhase",
    "RunState",
    "Settle",
    "Start",
    "Unit",
    "Workspace",
    "apply",
    "artifact_references",
    "check_transition",
    "content_hash",
    "item_key",
    "job_name",
    "job_spec",
    "key_material",
    "plan",
    "read_output_param",
    "read_outputs",
    "resume_state",
    "servable",
    "step_outputs",
    "step_phase",
    "unit_context",
]
