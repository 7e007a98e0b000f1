"""What a pipeline's steps would take: the durations file of a replay.

A mapping from a step (``train``) or one foreach item (``train[2]``) to a duration
(seconds, or ``30s``, ``5m``, ``2h``) or to ``{duration, outputs, failures}``:

    prep: 2m
    train: {duration: 30m, outputs: {accuracy: 0.91}}
    "train[2]": {duration: 45m, outputs: {accuracy: 0.95}}
    flaky: {duration: 1m, failures: 1}

``outputs`` are the output params the unit reports when it succeeds (what ``when``
conditions and ``foreach`` items downstream read); ``failures`` is how many attempts of
the unit fail (each after its duration) before one succeeds, so a step's ``retry`` and
the pipeline's ``onFailure`` play out. An item's entry takes what it leaves out from its
step's. Guarantees of ``load_timings``: every step of the pipeline has an entry; every
key names a step (an item key, a foreach step); every output is an output param its
step declares, of the declared type; or ``DocumentError`` names the file, the key, the
field and the fix.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.spec import parse_duration
from phalanx.spec.pipeline import Graph
from phalanx.spec.pipeline.conditions import Condition
from phalanx.spec.pipeline.params import a, check_value
from phalanx.spec.pipeline.templates import Kind, Template, Value
from phalanx.workflow import Unit

_KEY: Final = re.compile(r"(?P<step>[a-z0-9]([-a-z0-9]*[a-z0-9])?)(\[(?P<index>\d{1,6})\])?")
_FIELDS: Final = ("duration", "outputs", "failures")
_EXAMPLE: Final = "e.g. `prep: 5m` or `train: {duration: 30m, outputs: {accuracy: 0.9}}`"


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """How one unit plays out: ``failures`` failing attempts, then one that succeeds
    with ``outputs``; each attempt runs ``duration`` seconds once placed."""

    duration: float
    outputs: Mapping[str, Value] = field(default_factory=dict)
    failures: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Timings:
    """Every step's timing, and those of single foreach items."""

    steps: Mapping[str, Timing]
    items: Mapping[Unit, Timing] = field(default_factory=dict)

    def of(self, unit: Unit) -> Timing:
        """The timing of ``unit``: its own entry, else its step's."""
        return self.items.get(unit) or self.steps[unit.step]


def load_timings(path: Path, graph: Graph) -> Timings:
    """The timings in the YAML or JSON file ``path`` for ``graph``; raises
    ``DocumentError`` (see the module docstring)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise DocumentError(
            f"{path}: cannot be read ({error})", fix="give a readable file"
        ) from None
    except yaml.YAMLError as error:
        raise DocumentError(
            f"{path}: not YAML or JSON ({str(error).splitlines()[0]})",
            fix=f"write a mapping from step to duration, {_EXAMPLE}",
        ) from None
    return timings_of(raw, graph, source=str(path))


def timings_of(raw: Any, graph: Graph, *, source: str = "<durations>") -> Timings:
    """The timings in the parsed document ``raw`` (see ``load_timings``)."""
    if not isinstance(raw, dict):
        raise _error(source, "", "is not a mapping", f"map each step to its duration, {_EXAMPLE}")
    names = [*graph.order, *graph.final]
    steps: dict[str, Timing] = {}
    items: dict[tuple[str, int], Any] = {}
    for key, entry in raw.items():
        found = _KEY.fullmatch(str(key))
        step = found["step"] if found else str(key)
        if found is None or step not in names:
            match = difflib.get_close_matches(step, names, n=1)
            hint = f"did you mean {match[0]!r}? " if match else ""
            raise _error(
                source,
                str(key),
                "is not a step",
                f"{hint}steps: {', '.join(names)}; items: STEP[0]",
            )
        if found["index"] is None:
            steps[step] = _timing(source, str(key), entry, graph, step, None)
        elif graph.node(step).foreach is None:
            raise _error(source, str(key), "the step has no foreach", f"write {step} alone")
        else:
            items[(step, int(found["index"]))] = entry
    for name in names:
        if name not in steps:
            raise _error(source, name, "has no duration", f"add `{name}: 5m` (any duration)")
    for (step, param), reader in _read_params(graph).items():
        if param not in steps[step].outputs:
            raise _error(
                source,
                f"{step}.outputs.{param}",
                f"is read by step {reader} and not given",
                f"write `{step}: {{duration: ..., outputs: {{{param}: VALUE}}}}` (items "
                f"{step}[i] may give their own)",
            )
    return Timings(
        steps=steps,
        items={
            Unit(step, index): _timing(source, f"{step}[{index}]", entry, graph, step, steps[step])
            for (step, index), entry in sorted(items.items())
        },
    )


def _read_params(graph: Graph) -> dict[tuple[str, str], str]:
    """Each output param some step reads (``{{steps.S.outputs.P}}`` in a template, a
    ``when`` or ``foreach``), as (S, P), and the first step reading it."""
    read: dict[tuple[str, str], str] = {}
    for node in [*graph.steps.values(), *graph.final.values()]:
        for place, text in node.templates:
            parsed = Condition.parse(text) if place[0] == "when" else Template.parse(text)
            for ref in parsed.references:
                if ref.kind is Kind.STEPS and ref.name in graph.node(ref.step).outputs.params:
                    read.setdefault((ref.step, ref.name), node.name)
    return read


def _timing(
    source: str, key: str, entry: Any, graph: Graph, step: str, base: Timing | None
) -> Timing:
    if not isinstance(entry, dict):
        return Timing(
            duration=_duration(source, key, entry),
            outputs=base.outputs if base else {},
            failures=base.failures if base else 0,
        )
    for name in entry:
        if name not in _FIELDS:
            raise _error(source, f"{key}.{name}", "is not a field", f"use {', '.join(_FIELDS)}")
    if "duration" in entry:
        duration = _duration(source, f"{key}.duration", entry["duration"])
    elif base is not None:
        duration = base.duration
    else:
        raise _error(source, f"{key}.duration", "is required", "give the step's duration, e.g. 5m")
    failures = entry.get("failures", base.failures if base else 0)
    if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
        raise _error(source, f"{key}.failures", f"{failures!r} is not a count", "give 0, 1, 2 ...")
    outputs = dict(base.outputs if base else {})
    outputs.update(_outputs(source, key, entry.get("outputs", {}), graph, step))
    return Timing(duration=duration, outputs=outputs, failures=failures)


def _duration(source: str, key: str, value: Any) -> float:
    try:
        return parse_duration(value)
    except InvalidInput as error:
        raise _error(
            source, key, str(error).split("; fix:")[0], "give seconds, or 30s, 5m, 2h"
        ) from None


def _outputs(source: str, key: str, values: Any, graph: Graph, step: str) -> dict[str, Value]:
    where = f"{key}.outputs"
    if not isinstance(values, dict):
        raise _error(source, where, "is not a mapping", "map output params to values")
    declared = graph.node(step).outputs.params
    checked: dict[str, Value] = {}
    for name, value in values.items():
        spec = declared.get(str(name))
        if spec is None:
            known = ", ".join(declared) or "none"
            raise _error(
                source, f"{where}.{name}", f"step {step} declares no output param {name!r}",
                f"give one of its output params ({known})",
            )  # fmt: skip
        good = value if spec.type == "json" else check_value(value, spec.type)
        if good is None and value is not None:
            raise _error(
                source, f"{where}.{name}", f"{json.dumps(value)[:40]} is not {a(spec.type)}",
                f"give {a(spec.type)}, as the step's outputs declare",
            )  # fmt: skip
        checked[str(name)] = list(good) if isinstance(good, list) else good
    return checked


def _error(source: str, key: str, reason: str, fix: str) -> DocumentError:
    where = f"{source}: {key}: " if key else f"{source}: "
    return DocumentError(f"{where}{reason}", fix=fix)
