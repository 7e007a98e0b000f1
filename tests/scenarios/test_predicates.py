"""predicates: node selectors, affinity operators, taints and tolerations, cordons, task limits."""

from __future__ import annotations

import pytest

from phalanx.domain.job import NodeSelectorRequirement, SelectorOperator
from phalanx.domain.node import NODE_NAME_LABEL, Node, Taint, TaintEffect, Toleration
from phalanx.engine import ReasonCode
from tests.builders import bound, config, cycle, make_job, make_node

PLACE = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "binpack"])


def _labelled() -> list[Node]:
    return [
        make_node("a100", labels={"gpu": "A100", "mem": "40", "zone": "east"}),
        make_node("h100", labels={"gpu": "H100", "mem": "80", "zone": "west"}),
        make_node("plain", labels={"zone": "east"}),
    ]


def test_node_selector_places_only_on_matching_nodes() -> None:
    job = make_job("sel", gpus=1, replicas=3, node_selector={"gpu": "H100"})

    decisions = cycle(_labelled(), [job], PLACE)

    assert bound(decisions, "sel") == ["h100", "h100", "h100"]


def test_every_node_carries_its_name_as_a_label() -> None:
    """``phalanx.io/node``, as Kubernetes' ``kubernetes.io/hostname``: a selector keeps
    tasks on a named node, an affinity term off named ones."""
    on = make_job("on", gpus=1, replicas=2, node_selector={NODE_NAME_LABEL: "plain"})
    away = NodeSelectorRequirement(
        key=NODE_NAME_LABEL, operator=SelectorOperator.NOT_IN, values=("a100", "plain")
    )
    off = make_job("off", gpus=1, replicas=2, affinity=[away], created=1)

    decisions = cycle(_labelled(), [on, off], PLACE)

    assert bound(decisions, "on") == ["plain", "plain"]
    assert bound(decisions, "off") == ["h100", "h100"]


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        (SelectorOperator.IN, ("A100", "H100"), {"a100", "h100"}),
        (SelectorOperator.NOT_IN, ("A100",), {"h100", "plain"}),
        (SelectorOperator.EXISTS, (), {"a100", "h100"}),
        (SelectorOperator.DOES_NOT_EXIST, (), {"plain"}),
    ],
)
def test_affinity_operators_on_the_gpu_label(
    operator: SelectorOperator, values: tuple[str, ...], expected: set[str]
) -> None:
    term = NodeSelectorRequirement(key="gpu", operator=operator, values=values)
    # 8 one-GPU tasks per matching node would not fit elsewhere: spread them over every match
    job = make_job("aff", gpus=8, replicas=len(expected), affinity=[term])

    decisions = cycle(_labelled(), [job], PLACE)

    assert set(bound(decisions, "aff")) == expected


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [(SelectorOperator.GT, "50", "h100"), (SelectorOperator.LT, "50", "a100")],
)
def test_affinity_gt_and_lt_compare_numbers(
    operator: SelectorOperator, value: str, expected: str
) -> None:
    term = NodeSelectorRequirement(key="mem", operator=operator, values=(value,))
    job = make_job("num", gpus=1, replicas=2, affinity=[term])

    decisions = cycle(_labelled(), [job], PLACE)

    assert bound(decisions, "num") == [expected, expected]


def test_no_matching_node_says_which_predicate_excluded_how_many() -> None:
    job = make_job("nowhere", gpus=1, node_selector={"gpu": "B200"})

    decisions = cycle(_labelled(), [job], PLACE)

    reason = decisions.reason_for("nowhere")
    assert reason is not None and reason.code is ReasonCode.NO_MATCHING_NODE
    assert "0/3 nodes match" in reason.message and "3 by predicates" in reason.message
    assert "nodeSelector" in reason.message  # the fix


def test_a_no_schedule_taint_repels_tasks_without_a_toleration() -> None:
    nodes = [
        make_node("tainted", taints=[Taint(key="dedicated", value="infer")]),
        make_node("free"),
    ]
    plain = make_job("plain", gpus=8, replicas=1, created=0)
    tolerant = make_job(
        "tolerant",
        gpus=8,
        created=1,
        tolerations=[Toleration(key="dedicated", value="infer")],
    )
    nowhere = make_job("nowhere", gpus=8, created=2)

    decisions = cycle(nodes, [plain, tolerant, nowhere], PLACE)

    assert bound(decisions, "plain") == ["free"]
    assert bound(decisions, "tolerant") == ["tainted"]
    assert bound(decisions, "nowhere") == []


@pytest.mark.parametrize(
    ("toleration", "allowed"),
    [
        (Toleration(key="dedicated", operator="Exists"), True),
        (Toleration(operator="Exists"), True),  # empty key + Exists tolerates everything
        (Toleration(key="dedicated", value="train"), False),  # wrong value
        (Toleration(key="dedicated", value="infer", effect=TaintEffect.NO_EXECUTE), False),
    ],
)
def test_toleration_matching(toleration: Toleration, allowed: bool) -> None:
    nodes = [make_node("tainted", taints=[Taint(key="dedicated", value="infer")])]
    job = make_job("t", gpus=1, tolerations=[toleration])

    decisions = cycle(nodes, [job], PLACE)

    assert bound(decisions, "t") == (["tainted"] if allowed else [])


def test_a_no_execute_taint_also_repels_new_tasks() -> None:
    nodes = [make_node("draining", taints=[Taint(key="maint", effect=TaintEffect.NO_EXECUTE)])]

    decisions = cycle(nodes, [make_job("j", gpus=1)], PLACE)

    assert decisions.binds == ()


def test_a_prefer_no_schedule_node_is_used_only_when_nothing_else_fits() -> None:
    nodes = [
        make_node("soft", taints=[Taint(key="spot", effect=TaintEffect.PREFER_NO_SCHEDULE)]),
        make_node("normal"),
    ]

    decisions = cycle(nodes, [make_job("j", gpus=4, replicas=3, min_available=1)], PLACE)

    # binpack alone would fill "soft" first; the soft taint sends two tasks to "normal",
    # and only the third, which fits nowhere else, to "soft"
    assert bound(decisions, "j") == ["normal", "normal", "soft"]


def test_a_cordoned_node_gets_nothing_new() -> None:
    nodes = [make_node("cordoned", schedulable=False), make_node("open")]

    decisions = cycle(nodes, [make_job("j", gpus=8, replicas=2)], PLACE)

    assert decisions.binds == ()
    reason = decisions.reason_for("j")
    assert reason is not None and reason.code is ReasonCode.GANG


def test_only_cordoned_nodes_is_no_matching_node_with_the_fix() -> None:
    nodes = [make_node("c0", schedulable=False), make_node("c1", schedulable=False)]

    decisions = cycle(nodes, [make_job("j", gpus=1)], PLACE)

    reason = decisions.reason_for("j")
    assert reason is not None and reason.code is ReasonCode.NO_MATCHING_NODE
    assert "uncordon" in reason.message


def test_max_tasks_per_node_is_respected() -> None:
    nodes = [make_node("n0", max_tasks=2), make_node("n1", max_tasks=2)]

    decisions = cycle(nodes, [make_job("j", gpus=1, replicas=5, min_available=1)], PLACE)

    assert sorted(bound(decisions, "j")) == ["n0", "n0", "n1", "n1"]


def test_max_tasks_counts_tasks_already_running() -> None:
    nodes = [make_node("n0", max_tasks=3)]
    running = make_job("r", gpus=1, replicas=2, running_on=["n0", "n0"])

    decisions = cycle(nodes, [running, make_job("j", gpus=1, replicas=2)], PLACE)

    assert bound(decisions, "j") == []
    reason = decisions.reason_for("j")
    assert reason is not None and "max tasks" in reason.message


def test_a_task_larger_than_any_node_is_told_to_split() -> None:
    decisions = cycle([make_node("n0", gpus=8)], [make_job("huge", gpus=16)], PLACE)

    reason = decisions.reason_for("huge")
    assert reason is not None and reason.code is ReasonCode.NO_MATCHING_NODE
    assert reason.resource == "gpu" and "8 GPUs" in reason.message and "fix:" in reason.message


def test_a_task_tolerating_a_prefer_no_schedule_taint_is_not_steered_away() -> None:
    nodes = [
        make_node("soft", taints=[Taint(key="spot", effect=TaintEffect.PREFER_NO_SCHEDULE)]),
        make_node("normal"),
    ]
    job = make_job("j", gpus=4, tolerations=[Toleration(key="spot", operator="Exists")])

    decisions = cycle(nodes, [job], PLACE)

    assert bound(decisions, "j") == ["soft"]  # binpack's tie goes to the first node
