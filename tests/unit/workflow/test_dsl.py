"""The DSL builds the same documents as YAML, and both round-trip."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import DocumentError
from phalanx.spec.loader import load_pipelines
from phalanx.spec.pipeline.parts import RetrySpec
from phalanx.workflow.dsl import ITEM, RUN_ID, PipelineBuilder, item_key
from tests.unit.workflow.examples import FULL, TRI


def tri() -> PipelineBuilder:
    p = PipelineBuilder(
        "tri",
        params={"lr": 0.01},
        defaults={"queue": "wf", "resources": {"cpu": 1, "memory": "256Mi"}},
    )
    prep = p.step(
        "prep", command=["sh", "-c", "python prep.py > {{outputs.data}}"], outputs=["data"]
    )
    train = p.step(
        "train",
        depends_on=[prep],
        inputs={"artifacts": {"data": prep.outputs.data}},
        command=[
            "sh",
            "-c",
            f"python train.py --lr {p.params.lr} {{{{inputs.data}}}} {{{{outputs.model}}}}",
        ],
        outputs=["model"],
    )
    p.step(
        "validate",
        inputs={"artifacts": {"model": train.outputs.model}},
        command=["sh", "-c", "python validate.py {{inputs.model}}"],
    )
    return p


def test_the_dsl_builds_the_issue_example() -> None:
    assert tri().build() == load_pipelines(TRI)[0]


def test_references_are_checked_as_they_are_made() -> None:
    p = tri()
    with pytest.raises(AttributeError, match="params has no 'lrr'; declared: lr"):
        _ = p.params.lrr
    with pytest.raises(
        AttributeError, match=r"steps\.prep\.outputs has no 'model'; declared: data"
    ):
        _ = p.steps["prep"].outputs.model
    assert p.steps["train"].outputs["model"] == "{{steps.train.outputs.model}}"
    assert (ITEM, item_key("k"), RUN_ID) == ("{{item}}", "{{item.k}}", "{{run.id}}")


def test_models_and_every_field_are_accepted() -> None:
    p = PipelineBuilder("m", params={"xs": [1, 2]}, on_failure="continue", concurrency=2)
    p.component("base", resources={"cpu": 1}, retry=RetrySpec.model_validate({"maxAttempts": 2}))
    p.step(
        "fan", uses="base", foreach={"items": "{{params.xs}}", "maxItems": 5}, command=["x", ITEM]
    )
    p.finally_step("bye", uses="base", command="echo {{run.id}}")
    document = p.build()
    assert document.spec.components["base"].retry == RetrySpec.model_validate({"maxAttempts": 2})
    assert list(document.spec.finally_) == ["bye"]
    assert load_pipelines(document.to_yaml())[0] == document


def test_mistakes_are_refused_as_loading_refuses_them() -> None:
    p = PipelineBuilder("bad", defaults={"resources": {"cpu": 1}})
    p.step("a", comand=["x"])
    with pytest.raises(
        DocumentError,
        match=r"<dsl> document 1 \(Pipeline bad\): spec.steps.a.comand: unknown field; fix: did you mean 'command'",
    ):
        p.build()


def test_yaml_documents_become_builders_and_back() -> None:
    for text in (TRI, FULL):
        document = load_pipelines(text)[0]
        builder = PipelineBuilder.from_document(document)
        assert builder.build() == document
        builder.step("extra", command=["true"], depends_on=[next(iter(builder.steps))])
        assert "extra" in builder.build().spec.steps


# Any text but NUL (refused in commands), surrogates (not UTF-8) and braces (templates):
# control characters and unusual line breaks (U+0085, U+2028) included.
SAFE_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="{}\x00"), max_size=20
)
NAMES = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)


@st.composite
def builders(draw: st.DrawFn) -> PipelineBuilder:
    params = draw(
        st.dictionaries(
            st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True),
            st.integers(-5, 5)
            | st.floats(-1e6, 1e6, allow_nan=False)
            | st.booleans()
            | SAFE_TEXT
            | st.lists(st.integers(0, 9), max_size=3),
            max_size=3,
        )
    )
    p = PipelineBuilder(
        draw(NAMES),
        params=params,
        defaults={"resources": {"cpu": draw(st.integers(1, 8))}},
        on_failure=draw(st.sampled_from(["failFast", "continue"])),
    )
    names = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
    for i, name in enumerate(names):
        fields: dict[str, Any] = {
            "command": draw(
                st.lists(SAFE_TEXT.filter(bool), min_size=1, max_size=3)
                | SAFE_TEXT.filter(str.strip)
            )
        }
        if i and draw(st.booleans()):
            fields["depends_on"] = draw(
                st.lists(st.sampled_from(names[:i]), max_size=2, unique=True)
            )
        if draw(st.booleans()):
            fields["env"] = draw(
                st.dictionaries(
                    st.from_regex(r"[A-Z][A-Z0-9_]{0,5}", fullmatch=True), SAFE_TEXT, max_size=3
                )
            )
        if draw(st.booleans()):
            fields["outputs"] = draw(
                st.lists(
                    st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True), max_size=2, unique=True
                )
            )
        if draw(st.booleans()):
            fields["when"] = draw(st.sampled_from(["true", "1 < 2", "'a' in ['a']"]))
        if draw(st.booleans()):
            items = draw(st.lists(st.integers() | SAFE_TEXT, max_size=4))
            fields["foreach"] = {"items": items, "maxItems": max(len(items), 1)}
        if draw(st.booleans()):
            fields["retry"] = {"maxAttempts": draw(st.integers(1, 5)), "on": ["failed"]}
        if draw(st.booleans()):
            fields["timeout"] = draw(st.sampled_from(["30m", 90, "1h30m"]))
        if draw(st.booleans()):
            fields["cache"] = {"enabled": True, "files": ["a.py"]}
        p.step(name, **fields)
    return p


@settings(max_examples=150, deadline=None)
@given(builders())
def test_any_built_pipeline_round_trips_through_yaml_and_back_to_the_dsl(
    p: PipelineBuilder,
) -> None:
    document = p.build()
    assert load_pipelines(document.to_yaml())[0] == document
    assert PipelineBuilder.from_document(document).build() == document


@pytest.mark.parametrize(
    "text", ["\x85", "\u2028x", "\x01a", "\ufeff", "a\tb\nc", "yes", "0x10", "~", "- x", "#c", "é"]
)
def test_awkward_strings_survive_the_yaml_round_trip(text: str) -> None:
    p = PipelineBuilder("x", defaults={"resources": {"cpu": 1}}, params={"p": text})
    p.step("a", command=["echo", text], env={"E": text})
    document = p.build()
    assert load_pipelines(document.to_yaml())[0] == document
