"""The admin view's pictures: the queue tree in order with its flags, and the heatmap
grouped by network domain, each cell in the state its GPU is in."""

from __future__ import annotations

from typing import Any

from phalanx.client import GpuView, NodeView, QueueView
from phalanx.web.formatting import amount, percent
from phalanx.web.pictures import heatmap, queue_tree


def make_queue(
    name: str, *, parent: str = "root", computed: bool = True, **figures: dict[str, float]
) -> QueueView:
    """A queue view; ``computed``: a session computed its ``deserved`` share."""
    fields: dict[str, Any] = {"guarantee": {}, "deserved": {}, "capability": {}, "allocated": {}}
    fields.update(figures)
    return QueueView(
        name=name, parent=parent, weight=1.0, document={}, share_computed=computed, **fields
    )


def make_node(
    name: str,
    used: tuple[float, ...],
    *,
    tor: str | None = None,
    network: dict[str, str] | None = None,
    **flags: bool,
) -> NodeView:
    return NodeView(
        name=name,
        capacity={"cpu": 8000.0},
        allocated={"cpu": 2000.0},
        labels={} if tor is None else {"tor": tor},
        network=network or {},
        gpus=[GpuView(index=i, used=u, tasks=["t"] if u else []) for i, u in enumerate(used)],
        **flags,
    )


def test_the_tree_is_depth_first_and_flags_borrowing_and_over_quota() -> None:
    lines = queue_tree(
        [
            make_queue(
                "b", deserved={"gpu": 4}, configured_deserved={"gpu": 4}, allocated={"gpu": 6}
            ),
            make_queue("a"),
            make_queue(
                "a-2",
                parent="a",
                deserved={"gpu": 2},
                configured_deserved={"gpu": 2},
                capability={"gpu": 2},
                allocated={"gpu": 3},
            ),
            make_queue(
                "a-1",
                parent="a",
                deserved={"gpu": 4},
                configured_deserved={"gpu": 4, "cpu": 8000},
                allocated={"gpu": 1},
            ),
        ]
    )
    assert [(line.queue.name, line.depth) for line in lines] == [
        ("a", 0),
        ("a-1", 1),
        ("a-2", 1),
        ("b", 0),
    ]
    a, a1, a2, b = lines
    assert [(bar.resource, bar.scale) for bar in a.bars] == [("gpu", 0), ("cpu", 0)]
    assert [bar.resource for bar in a1.bars] == ["gpu", "cpu"]
    assert a1.lending and not a1.borrowing and not a1.over
    assert a2.borrowing and a2.over
    assert b.borrowing and not b.over  # no capability: never over it
    assert [(bar.resource, bar.borrowed) for bar in b.borrowed] == [("gpu", 2)]
    assert b.bars[0].scale == 6
    assert (b.bars[0].configured, b.bars[0].deserved) == (4, 4)


def test_borrowing_is_per_resource_over_the_share_the_last_session_computed() -> None:
    # issue 37: guaranteed 4 GPUs and no CPU, holding half a GPU and 2 CPUs of a share
    # (by weight) of 16: it borrows nothing, though it holds CPU above its guarantee of 0
    small, cpu_hog, both, weighted = queue_tree(
        [
            make_queue(
                "a-small",
                guarantee={"gpu": 4, "cpu": 0},
                deserved={"gpu": 4, "cpu": 16000},
                allocated={"gpu": 0.5, "cpu": 2000},
            ),
            make_queue(
                "b-cpu-hog",
                guarantee={"gpu": 4},
                deserved={"gpu": 4, "cpu": 8000},
                allocated={"gpu": 0.5, "cpu": 12000},
            ),
            make_queue(
                "c-both",
                deserved={"gpu": 2, "cpu": 8000, "memory": 2.0**34},
                allocated={"gpu": 3, "cpu": 9000, "memory": 2.0**33},
            ),
            # a configured share above what the session computed (another plugin, or a
            # parent's cap): the computed share is what reclaim goes by
            make_queue(
                "d-weighted",
                deserved={"gpu": 2},
                configured_deserved={"gpu": 4},
                allocated={"gpu": 3},
            ),
        ]
    )
    assert not small.borrowing and small.borrowed == ()
    assert [bar.resource for bar in cpu_hog.borrowed] == ["cpu"]
    assert cpu_hog.borrowed[0].borrowed == 4000
    assert [(bar.resource, bar.borrowed) for bar in both.borrowed] == [("gpu", 1), ("cpu", 1000)]
    assert [bar.resource for bar in weighted.borrowed] == ["gpu"] and weighted.lending


def test_nothing_is_borrowed_before_a_session_computed_the_shares() -> None:
    # before a session the view's share is the guarantee alone: a floor, not a share
    (line,) = queue_tree(
        [
            make_queue(
                "q",
                computed=False,
                guarantee={"gpu": 1},
                deserved={"gpu": 1},
                configured_deserved={"gpu": 1},
                allocated={"gpu": 3, "cpu": 4000},
            )
        ]
    )
    assert not line.borrowing and all(bar.borrowed == 0 for bar in line.bars)


def test_the_heatmap_groups_nodes_by_domain_and_colours_each_gpu() -> None:
    domains = heatmap(
        [
            make_node("n1", (0.0, 0.5, 1.0), tor="tor-2"),
            make_node("n2", (0.0,), cordoned=True),
            make_node("n3", (1.0,), tor="tor-1", ready=False),
            make_node("n4", (0.0,), tor="tor-2"),
        ]
    )
    assert [(d.name, [r.node.name for r in d.rows]) for d in domains] == [
        ("tor-1", ["n3"]),
        ("tor-2", ["n1", "n4"]),
        ("", ["n2"]),
    ]
    states = {r.node.name: [c.state for c in r.cells] for d in domains for r in d.rows}
    assert states == {
        "n1": ["idle", "shared", "allocated"],
        "n2": ["cordoned"],
        "n3": ["down"],
        "n4": ["idle"],
    }
    assert domains[1].rows[0].cpu_used == 0.25
    assert "n1 GPU 1" in domains[1].rows[0].cells[1].title


def test_the_heatmap_groups_by_the_network_place_before_any_label() -> None:
    domains = heatmap(
        [
            make_node("n1", (0.0,), network={"tor": "tor-1", "spine": "spine-0"}, tor="other"),
            make_node("n2", (0.0,), network={"spine": "spine-1"}),
            make_node("n3", (0.0,), tor="tor-1"),
        ]
    )
    assert [(d.name, d.above, [r.node.name for r in d.rows]) for d in domains] == [
        ("spine-1", "", ["n2"]),
        ("tor-1", "spine spine-0", ["n1", "n3"]),
    ]


def test_amounts_read_as_people_write_them() -> None:
    assert amount(2500, "cpu") == "2.5"
    assert amount(16 * 1024**3, "memory") == "16Gi"
    assert amount(0.5, "gpu") == "0.5"
    assert percent(3, 4) == "75.0%" and percent(5, 4) == "100.0%" and percent(1, 0) == "0%"


def test_a_resource_without_a_bounded_share_is_never_borrowed() -> None:
    # the view leaves an unbounded share out of its map
    (line,) = queue_tree(
        [
            make_queue(
                "q",
                deserved={"gpu": 4},
                configured_deserved={"gpu": 4},
                allocated={"gpu": 2, "memory": 2.0**30},
            )
        ]
    )
    memory = next(bar for bar in line.bars if bar.resource == "memory")
    assert not memory.computed and not memory.borrowing and not line.borrowing
