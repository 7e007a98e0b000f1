"""The ``Pipeline`` document and its language: steps and their parts, parameters,
``{{...}}`` templates, ``when`` conditions, cron schedules, and the graph a valid
document is (``dag``). ``phalanx.workflow`` runs what this package describes;
``phalanx.spec.loader`` reads it from text (``load_pipelines``, ``build_pipeline``).

Each module's docstring states what it guarantees.
"""

from phalanx.spec.pipeline.conditions import Condition, ConditionError
from phalanx.spec.pipeline.cron import CronError, CronSchedule
from phalanx.spec.pipeline.dag import Graph, GraphError, StepNode, build_graph
from phalanx.spec.pipeline.document import Pipeline, PipelineDocument
from phalanx.spec.pipeline.params import Param, parse_assignments, resolve
from phalanx.spec.pipeline.parts import MAX_FANOUT
from phalanx.spec.pipeline.templates import Context, Template, TemplateError, render_argv

__all__ = [
    "MAX_FANOUT",
    "Condition",
    "ConditionError",
    "Context",
    "CronError",
    "CronSchedule",
    "Graph",
    "GraphError",
    "Param",
    "Pipeline",
    "PipelineDocument",
    "StepNode",
    "Template",
    "TemplateError",
    "build_graph",
    "parse_assignments",
    "render_argv",
    "resolve",
]
