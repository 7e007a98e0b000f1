"""Conditions: a closed grammar, strict types, no code ever run."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.spec.pipeline.conditions import MAX_DEPTH, Condition, ConditionError
from phalanx.spec.pipeline.templates import Context, Kind, TemplateError

CTX = Context(
    step="promote",
    params={"threshold": 0.9, "dry": False, "mode": "fast", "tags": ["a", "b"], "n": 3},
    steps={"eval": {"accuracy": 0.93, "label": "good"}},
    item={"size": "small"},
    has_item=True,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{steps.eval.outputs.accuracy}} >= {{params.threshold}}", True),
        ("{{steps.eval.outputs.accuracy}} > 0.95", False),
        ("not {{params.dry}}", True),
        ("{{params.dry}} or {{params.n}} == 3", True),
        ("{{params.dry}} and {{params.n}} == 3", False),
        ("not ({{params.dry}} or {{params.n}} != 3)", True),
        ("{{params.mode}} == 'fast'", True),
        ('{{params.mode}} != "fast"', False),
        ("'a' in {{params.tags}}", True),
        ("'z' not in {{params.tags}}", True),
        ("'oo' in {{steps.eval.outputs.label}}", True),
        ("{{item.size}} in ['small', 'medium']", True),
        ("{{params.n}} == 3.0", True),
        ("{{params.dry}} == 0", False),
        ("1 == true", False),
        ("{{params.n}} > -1 and {{params.n}} < 1e3", True),
        ("null == null", True),
        ("true", True),
    ],
)
def test_conditions_evaluate(text: str, expected: bool) -> None:
    assert Condition.parse(text).evaluate(CTX) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{params.n}}", "needs true or false, got 3"),
        ("{{params.n}} and true", "and needs true or false"),
        ("{{params.mode}} > 1", "compares two numbers or two strings"),
        ("1 in 2", "in needs a list"),
    ],
)
def test_type_errors_name_the_step_and_the_fix(text: str, message: str) -> None:
    with pytest.raises(ConditionError, match=f"step promote, when: .*{message}") as info:
        Condition.parse(text).evaluate(CTX)
    assert info.value.fix


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("1e999 > 1", "1e999 is too large"),
        ("9" * 400 + " > 1", "is too large"),
        ("__import__('os').system('id')", "cannot read"),
        ("os", "expected a value, found 'os'"),
        ("{{params.x}} ==", "ends too early"),
        ("{{params.x}} == 1 1", "unexpected '1'"),
        ("(true", r"expected '\)'"),
        ("{{params.x | raw}}", "filters do not apply"),
        ("{{params.x}} ; rm -rf /", "cannot read"),
        ("a" * 5000, "more than the limit"),
        ("(" * (MAX_DEPTH + 1) + "true" + ")" * (MAX_DEPTH + 1), "nested more than"),
        ("not " * 100 + "true", "nested more than"),
    ],
)
def test_bad_conditions_are_refused_when_parsed(text: str, message: str) -> None:
    with pytest.raises(ConditionError, match=message) as info:
        Condition.parse(text)
    assert info.value.fix


def test_references_are_listed_and_unknown_ones_fail_at_evaluation() -> None:
    condition = Condition.parse("{{steps.eval.outputs.f1}} > 0.5 and {{params.n}} in [1, 2]")
    assert [(r.kind, r.step, r.name) for r in condition.references] == [
        (Kind.STEPS, "eval", "f1"),
        (Kind.PARAMS, "", "n"),
    ]
    with pytest.raises(TemplateError, match=r"step promote, when: .*no output 'f1'"):
        condition.evaluate(CTX)


WORDS = [*"(){}[]'\"=<>!,.", " and ", " or ", " not ", " in ", "1", "{{params.n}}", "true"]


@given(st.lists(st.sampled_from(WORDS), max_size=12).map("".join))
def test_parse_fails_only_with_condition_or_template_errors(text: str) -> None:
    try:
        condition = Condition.parse(text)
    except (ConditionError, TemplateError):
        return
    with contextlib.suppress(ConditionError, TemplateError):
        assert condition.evaluate(CTX) in (True, False)
