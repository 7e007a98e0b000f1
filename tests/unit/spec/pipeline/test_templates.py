"""Templates parse once, render by lookup only, and quote values inside shell scripts."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.spec.pipeline.templates import (
    Context,
    Filter,
    Kind,
    Reference,
    Template,
    TemplateError,
    render_argv,
    script_positions,
)

HOSTILE = ["; rm -rf /", "$(reboot)", "`id`", "a'b", 'a"b', "x\ny", "$HOME", "*", "-rf", ""]


def context(**kwargs: object) -> Context:
    base: dict[str, object] = {
        "step": "train",
        "params": {"lr": 0.01, "name": "bert", "flag": True, "layers": [1, 2]},
        "inputs": {"data": "/runs/r1/prep/data"},
        "outputs": {"model": "/runs/r1/train/model"},
        "steps": {"prep": {"data": "/runs/r1/prep/data", "rows": 10}},
        "run_id": "r1",
    }
    base.update(kwargs)
    return Context(**base)  # type: ignore[arg-type]


def test_parse_splits_literals_and_references() -> None:
    template = Template.parse("python train.py --lr {{ params.lr }} {{inputs.data}}")
    assert template.parts == (
        "python train.py --lr ",
        Reference(kind=Kind.PARAMS, name="lr"),
        " ",
        Reference(kind=Kind.INPUTS, name="data"),
    )
    assert Template.parse("{{steps.prep.outputs.data}}").single == Reference(
        kind=Kind.STEPS, step="prep", name="data"
    )
    assert Template.parse("{{item.key | shquote}}").single == Reference(
        kind=Kind.ITEM, name="key", filter=Filter.SHQUOTE
    )


def test_render_writes_values_as_text_and_json() -> None:
    text = "{{params.lr}} {{params.name}} {{params.flag}} {{params.layers}} {{run.id}} {{steps.prep.outputs.rows}}"
    assert Template.parse(text).render(context(), field="command[0]") == (
        "0.01 bert true [1,2] r1 10"
    )
    assert (
        Template.parse("{{item}}-{{item.k}}").render(
            context(item={"k": "v"}, has_item=True), field="env.X"
        )
        == '{"k":"v"}-v'
    )


def test_literal_braces_are_written_as_quoted_strings_and_round_trip() -> None:
    template = Template.parse('a {{"{{"}} b }} {{params.lr}}')
    assert template.render(context(), field="f") == "a {{ b }} 0.01"
    assert Template.parse(str(template)) == template


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{params.lr", "never closed"),
        ("{{ params }}", "is not a reference phalanx knows"),
        ("{{params.lr | upper}}", "unknown filter 'upper'"),
        ("{{steps.Prep.outputs.x}}", "is not a reference"),
        ("{{steps.prep.x}}", "is not a reference"),
        ("{{__import__('os')}}", "is not a reference"),
        ("{{run.secret}}", "is not a reference"),
    ],
)
def test_bad_templates_are_refused_with_a_fix(text: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message) as info:
        Template.parse(text)
    assert info.value.fix


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "{{params.lrr}}",
            r"step train, command\[2\]: \{\{params.lrr\}\}: no param named 'lrr'.*params.lr",
        ),
        ("{{inputs.model}}", "no input named 'model'; fix: use one of inputs.data"),
        ("{{steps.eval.outputs.acc}}", "step 'eval' has no outputs here"),
        (
            "{{steps.prep.outputs.x}}",
            "step 'prep' has no output 'x'; fix: use one of steps.prep.outputs.data",
        ),
        ("{{item}}", "the step has no foreach"),
    ],
)
def test_unknown_references_name_the_step_field_and_reference(text: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        Template.parse(text).render(context(), field="command[2]")


def test_item_keys_are_checked() -> None:
    with pytest.raises(TemplateError, match=r"has no key 'b'; fix: use one of item\.a"):
        Template.parse("{{item.b}}").render(context(item={"a": 1}, has_item=True), field="f")


def test_script_positions_find_the_shell_script() -> None:
    assert script_positions(["sh", "-c", "x"]) == {2}
    assert script_positions(["/bin/bash", "-euc", "x", "arg0"]) == {2}
    assert script_positions(["bash", "-e", "-c", "x"]) == {3}
    assert script_positions(["python", "-c", "x"]) == frozenset()
    assert script_positions(["sh", "script.sh", "-c"]) == frozenset()
    assert script_positions(["sh", "-c"]) == frozenset()
    assert script_positions(["/usr/bin/env", "bash", "-c", "x"]) == {3}
    assert script_positions(["env", "-i", "A=1", "sh", "-ec", "x"]) == {5}
    assert script_positions(["env", "python", "-c", "x"]) == frozenset()
    assert script_positions(["env"]) == frozenset()


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_values_stay_one_word_in_a_script(hostile: str, tmp_path: object) -> None:
    argv = render_argv(
        ["sh", "-c", "printf '%s\\n' {{params.name}} > /dev/null; printf '%s' {{params.name}}"],
        context(params={"name": hostile}),
        field="command",
    )
    assert argv[2].endswith(shlex.quote(hostile))
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=10)
    assert done.stdout == hostile


@pytest.mark.parametrize("hostile", HOSTILE)
def test_plain_arguments_are_verbatim_and_raw_is_verbatim_in_scripts(hostile: str) -> None:
    ctx = context(params={"name": hostile})
    assert render_argv(["echo", "{{params.name}}"], ctx, field="command") == ["echo", hostile]
    assert render_argv(["sh", "-c", "{{params.name | raw}}"], ctx, field="command")[2] == hostile
    assert render_argv(["x", "--n={{params.name | shquote}}"], ctx, field="command")[1] == (
        "--n=" + shlex.quote(hostile)
    )


@given(st.text(max_size=40))
def test_any_value_survives_a_shell_script_unchanged(value: str) -> None:
    value = value.replace("\x00", "")
    argv = render_argv(
        ["sh", "-c", "printf '%s' {{params.v}}"], context(params={"v": value}), field="c"
    )
    assert shlex.split(argv[2])[2] == value


@given(st.text(alphabet=st.sampled_from("ab{}\"' .|"), max_size=30))
def test_parse_never_fails_other_than_with_template_error(text: str) -> None:
    try:
        template = Template.parse(text)
    except TemplateError:
        return
    assert Template.parse(str(template)) == template
