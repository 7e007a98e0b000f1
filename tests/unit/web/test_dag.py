"""The run page's DAG layout: columns by topological level, rows ordered to follow their
dependencies, edges from a box's right side to the next's left, the same answer every
time; unknown dependencies and cycles do not break it."""

from __future__ import annotations

from phalanx.web.dag import BOX_HEIGHT, BOX_WIDTH, GAP_X, GAP_Y, MARGIN, Box, layout, levels

DIAMOND = [
    ("prep", []),
    ("train-a", ["prep"]),
    ("train-b", ["prep"]),
    ("eval", ["train-a", "train-b"]),
    ("report", ["prep", "eval"]),
]


def test_a_step_sits_one_column_right_of_its_deepest_dependency() -> None:
    assert levels(DIAMOND) == {"prep": 0, "train-a": 1, "train-b": 1, "eval": 2, "report": 3}


def test_boxes_sit_on_a_grid_and_edges_join_right_side_to_left_side() -> None:
    drawn = layout(DIAMOND)
    boxes = {box.name: box for box in drawn.boxes}
    assert boxes["prep"] == Box(name="prep", level=0, row=0, x=MARGIN, y=MARGIN)
    assert boxes["train-b"] == Box(
        name="train-b",
        level=1,
        row=1,
        x=MARGIN + BOX_WIDTH + GAP_X,
        y=MARGIN + BOX_HEIGHT + GAP_Y,
    )
    assert [box.name for box in drawn.boxes] == [name for name, _ in DIAMOND]
    assert [(line.source, line.target) for line in drawn.lines] == [
        ("prep", "train-a"),
        ("prep", "train-b"),
        ("train-a", "eval"),
        ("train-b", "eval"),
        ("prep", "report"),
        ("eval", "report"),
    ]
    for line in drawn.lines:
        source, target = boxes[line.source], boxes[line.target]
        assert (line.x1, line.y1) == (source.x + BOX_WIDTH, source.y + BOX_HEIGHT // 2)
        assert (line.x2, line.y2) == (target.x, target.y + BOX_HEIGHT // 2)
        assert line.x1 < line.x2  # always left to right
    assert drawn.width == 2 * MARGIN + 4 * BOX_WIDTH + 3 * GAP_X
    assert drawn.height == 2 * MARGIN + 2 * BOX_HEIGHT + GAP_Y


def test_rows_follow_their_dependencies_and_the_answer_never_changes() -> None:
    # b2 depends on the second root, b1 on the first: each sits in its parent's row,
    # whatever order they are given in.
    steps = [("r1", []), ("r2", []), ("b2", ["r2"]), ("b1", ["r1"])]
    rows = {box.name: box.row for box in layout(steps).boxes}
    assert rows == {"r1": 0, "r2": 1, "b1": 0, "b2": 1}
    assert layout(steps) == layout(list(steps))


def test_unknown_dependencies_cycles_and_repeats_are_ignored() -> None:
    drawn = layout([("a", ["ghost"]), ("b", ["a", "c"]), ("c", ["b"]), ("a", ["b"])])
    assert [box.name for box in drawn.boxes] == ["a", "b", "c"]
    assert all(
        next(b for b in drawn.boxes if b.name == line.source).level
        < next(b for b in drawn.boxes if b.name == line.target).level
        for line in drawn.lines
    )
    assert layout([]).boxes == () and layout([]).width == 2 * MARGIN
