"""``{{...}}`` references in a step's strings: parsed once, rendered without running code.

A template is literal text with references between ``{{`` and ``}}``::

    {{params.NAME}}            a pipeline parameter (as overridden at submit)
    {{inputs.NAME}}            an input of this step: an artifact's path, or a value
    {{outputs.NAME}}           an output of this step: the path it writes the output to
    {{steps.STEP.outputs.NAME}} an output of an upstream step (implies dependsOn: [STEP]);
                               of a foreach step: the list of its items' outputs
    {{item}}  {{item.KEY}}     the current item of a foreach step (KEY: of a mapping item)
    {{run.id}}                 the run's id
    {{"{{"}}                   a quoted string stands for itself (a literal ``{{``)

Guarantees:

- ``Template.parse`` reads the text once into literal and reference parts, or raises
  ``TemplateError``; rendering only looks values up in a ``Context``: no code ever runs.
- A reference to something the context does not hold raises ``TemplateError`` naming the
  step, the field and the reference (``Context.step``, the ``field`` argument).
- Values become text thus: a string as it is; ``true``/``false``; a number as JSON writes
  it; a list or mapping as compact JSON.

Shell safety. A step's command is an argv list handed to ``execve``: an argument is never
split or read by a shell, so a value substituted into a plain argument (``["python",
"train.py", "--lr", "{{params.lr}}"]``) is inserted verbatim, whatever it holds. The one
place a value meets a shell is a *script*: the argument after ``-c`` of ``sh``, ``bash``,
``dash``, ``zsh`` or ``ksh``, also run through ``env`` (and a command written as one
string, which phalanx runs as ``/bin/sh -c``). There every reference is quoted by ``shlex.quote`` when rendered, so
``; rm -rf /`` arrives as one harmless word; values made of safe characters (``0.01``,
``/runs/r1/prep/data``) are unchanged. So: do not wrap references in quotes inside a
script, phalanx does it. Filters change this: ``{{params.x | shquote}}`` quotes anywhere
(for a script a program runs later, for instance), ``{{params.x | raw}}`` inserts
verbatim even in a script (the value then *is* shell code: only for trusted values), and
``{{params.x | json}}`` writes the value as JSON (quoted as well in a script).
Other interpreters (``python -c``, ``perl -e``) get values verbatim inside their code:
pass values to such code as separate arguments or environment variables instead.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, TypeAlias

from phalanx.domain.errors import InvalidInput

#: A value a template may insert: JSON-like (what params, items and output params hold).
Value: TypeAlias = str | int | float | bool | list["Value"] | dict[str, "Value"] | None

#: Longest template text accepted, and most references in one template.
MAX_TEMPLATE_LENGTH: Final = 64 * 2**10
MAX_REFERENCES: Final = 256

#: Programs whose ``-c`` argument is a shell script.
SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh"})

_NAME: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_STEP: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_PATHS: Final = (
    re.compile(rf"(?P<kind>params|inputs|outputs)\.(?P<name>{_NAME})"),
    re.compile(rf"(?P<kind>steps)\.(?P<step>{_STEP})\.outputs\.(?P<name>{_NAME})"),
    re.compile(rf"(?P<kind>item)(\.(?P<name>{_NAME}))?"),
    re.compile(r"(?P<kind>run)\.(?P<name>id)"),
)
_STRING: Final = re.compile(r"\"([^\"\\]*)\"|'([^'\\]*)'")
_FORMS: Final = (
    "params.NAME, inputs.NAME, outputs.NAME, steps.STEP.outputs.NAME, item, item.KEY, run.id"
)


class TemplateError(InvalidInput):
    """A template that does not parse, or a reference that cannot be resolved."""


class Filter(StrEnum):
    """How a value is written into the text (see the module docstring)."""

    AUTO = "auto"  # quoted inside a shell script, verbatim elsewhere
    SHQUOTE = "shquote"
    RAW = "raw"
    JSON = "json"


class Kind(StrEnum):
    """What a reference points at."""

    PARAMS = "params"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    STEPS = "steps"
    ITEM = "item"
    RUN = "run"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """One ``{{...}}``: ``kind``, the ``step`` of ``steps.STEP.outputs.NAME``, and ``name``
    (empty for ``{{item}}``)."""

    kind: Kind
    name: str = ""
    step: str = ""
    filter: Filter = Filter.AUTO

    def __str__(self) -> str:
        path = {
            Kind.STEPS: f"steps.{self.step}.outputs.{self.name}",
            Kind.ITEM: f"item.{self.name}" if self.name else "item",
        }.get(self.kind, f"{self.kind.value}.{self.name}")
        suffix = "" if self.filter is Filter.AUTO else f" | {self.filter.value}"
        return "{{" + path + suffix + "}}"


def parse_reference(text: str) -> Reference:
    """The reference written ``text`` (what lies between the braces); raises
    ``TemplateError``."""
    path, _, filter_text = (part.strip() for part in text.partition("|"))
    chosen = Filter.AUTO
    if filter_text:
        try:
            chosen = Filter(filter_text)
        except ValueError:
            raise TemplateError(
                f"{{{{{text[:60]}}}}}: unknown filter {filter_text[:30]!r}",
                fix="use | shquote, | raw or | json, or no filter",
            ) from None
        if chosen is Filter.AUTO:
            raise TemplateError(f"{{{{{text[:60]}}}}}: auto is not a filter", fix="remove it")
    for pattern in _PATHS:
        match = pattern.fullmatch(path)
        if match:
            return Reference(
                kind=Kind(match["kind"]),
                name=match["name"] or "",
                step=match.groupdict().get("step") or "",
                filter=chosen,
            )
    raise TemplateError(
        f"{{{{{text[:60]}}}}} is not a reference phalanx knows", fix=f"write one of {_FORMS}"
    )


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal strings and references, in order."""

    parts: tuple[str | Reference, ...]

    @staticmethod
    def parse(text: str) -> Template:
        """Parse ``text``; raises ``TemplateError`` for an unclosed ``{{``, an unknown
        reference or filter, or a text over the limits."""
        if len(text) > MAX_TEMPLATE_LENGTH:
            raise TemplateError(
                f"{len(text)} characters is more than the limit of {MAX_TEMPLATE_LENGTH}",
                fix="put long text in a file the step reads",
            )
        parts: list[str | Reference] = []
        literal, position = "", 0
        while (start := text.find("{{", position)) >= 0:
            end = text.find("}}", start + 2)
            inner = text[start + 2 : max(end, start + 2)].strip()
            if end < 0 or ("{{" in inner and not _STRING.fullmatch(inner)):
                raise TemplateError(
                    f"{{{{ at character {start + 1} is never closed",
                    fix='close it with }}, or write {{"{{"}} for literal braces',
                )
            literal += text[position:start]
            string = _STRING.fullmatch(inner)
            if string:
                literal += string[1] if string[1] is not None else string[2]
            else:
                if literal:
                    parts.append(literal)
                literal = ""
                parts.append(parse_reference(inner))
            position = end + 2
        literal += text[position:]
        if literal:
            parts.append(literal)
        if sum(isinstance(p, Reference) for p in parts) > MAX_REFERENCES:
            raise TemplateError(
                f"more than {MAX_REFERENCES} references in one string",
                fix="pass the values in a file instead",
            )
        return Template(tuple(parts))

    @property
    def references(self) -> tuple[Reference, ...]:
        """The references, in order."""
        return tuple(p for p in self.parts if isinstance(p, Reference))

    @property
    def single(self) -> Reference | None:
        """The reference when the template is exactly one reference and nothing else."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Reference):
            return self.parts[0]
        return None

    def render(self, context: Context, *, field: str, shell: bool = False) -> str:
        """The text with every reference replaced; ``shell``: the text is a shell script
        (references are quoted, see the module docstring). Raises ``TemplateError``."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                out.append(_write(context.lookup(part, field=field), part.filter, shell=shell))
        return "".join(out)

    def __str__(self) -> str:
        return "".join(
            p.replace("{{", '{{"{{"}}') if isinstance(p, str) else str(p) for p in self.parts
        )


def to_text(value: Value) -> str:
    """``value`` as a template writes it: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _write(value: Value, chosen: Filter, *, shell: bool) -> str:
    text = json.dumps(value, ensure_ascii=False) if chosen is Filter.JSON else to_text(value)
    if chosen is Filter.RAW:
        return text
    if chosen is Filter.SHQUOTE or shell:
        return shlex.quote(text)
    return text


def script_positions(argv: Sequence[str]) -> frozenset[int]:
    """Indexes of ``argv`` that a shell reads as a script: the argument after the first
    option holding ``c`` (``-c``, ``-ec``, ``-xc`` ...) of a known shell, the shell
    possibly run through ``env`` (``env [-i] [NAME=value ...] bash -c ...``)."""
    start = 0
    if argv and argv[0].rsplit("/", 1)[-1] == "env":
        start = 1
        while start < len(argv) and (argv[start].startswith("-") or "=" in argv[start]):
            start += 1
    if start >= len(argv) or argv[start].rsplit("/", 1)[-1] not in SHELLS:
        return frozenset()
    for i in range(start + 1, len(argv)):
        arg = argv[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            return frozenset()
        if not arg.startswith("--") and "c" in arg[1:]:
            return frozenset({i + 1}) if i + 1 < len(argv) else frozenset()
    return frozenset()


def render_argv(argv: Sequence[str], context: Context, *, field: str) -> list[str]:
    """Each argument of ``argv`` rendered; a shell script's references quoted."""
    scripts = script_positions(argv)
    return [
        Template.parse(arg).render(context, field=f"{field}[{i}]", shell=i in scripts)
        for i, arg in enumerate(argv)
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What a step's references resolve to when it runs.

    ``inputs`` and ``outputs`` hold paths (artifacts) or values (params); ``steps`` holds
    each upstream step's outputs (a foreach step's: lists, one entry per item).
    ``has_item`` tells ``{{item}}`` from a missing item (an item may be ``null``).
    """

    step: str
    params: Mapping[str, Value] = field(default_factory=dict)
    inputs: Mapping[str, Value] = field(default_factory=dict)
    outputs: Mapping[str, Value] = field(default_factory=dict)
    steps: Mapping[str, Mapping[str, Value]] = field(default_factory=dict)
    item: Value = None
    has_item: bool = False
    run_id: str = ""

    def lookup(self, ref: Reference, *, field: str) -> Value:
        """The value ``ref`` stands for; raises ``TemplateError`` naming step, field, ref."""
        where = f"step {self.step}, {field}: {ref}"
        match ref.kind:
            case Kind.PARAMS | Kind.INPUTS | Kind.OUTPUTS:
                table = {Kind.PARAMS: self.params, Kind.INPUTS: self.inputs}.get(
                    ref.kind, self.outputs
                )
                if ref.name in table:
                    return table[ref.name]
                raise TemplateError(
                    f"{where}: no {ref.kind.value[:-1]} named {ref.name!r}",
                    fix=_known(ref.kind.value, list(table)),
                )
            case Kind.STEPS:
                upstream = self.steps.get(ref.step)
                if upstream is None:
                    raise TemplateError(
                        f"{where}: step {ref.step!r} has no outputs here",
                        fix="reference a step that ran before this one",
                    )
                if ref.name not in upstream:
                    raise TemplateError(
                        f"{where}: step {ref.step!r} has no output {ref.name!r}",
                        fix=_known(f"steps.{ref.step}.outputs", list(upstream)),
                    )
                return upstream[ref.name]
            case Kind.ITEM:
                return self._item(ref, where)
            case Kind.RUN:
                return self.run_id

    def _item(self, ref: Reference, where: str) -> Value:
        if not self.has_item:
            raise TemplateError(f"{where}: the step has no foreach", fix="add a foreach")
        if not ref.name:
            return self.item
        if isinstance(self.item, dict) and ref.name in self.item:
            return self.item[ref.name]
        keys = list(self.item) if isinstance(self.item, dict) else []
        raise TemplateError(
            f"{where}: the item {to_text(self.item)[:60]} has no key {ref.name!r}",
            fix=_known("item", keys) if keys else "use {{item}}: the items are not mappings",
        )


def _known(prefix: str, names: list[str]) -> str:
    if not names:
        return f"declare it first; there is no {prefix}.NAME here"
    return "use one of " + ", ".join(f"{prefix}.{n}" for n in sorted(names)[:20])


def iter_references(texts: Sequence[str]) -> Iterator[Reference]:
    """Every reference of ``texts``, each parsed (raises ``TemplateError``)."""
    for text in texts:
        yield from Template.parse(text).references
