"""LazyQueue pops by current key, breaking ties on the stable key."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from phalanx.engine.framework.ordering import LazyQueue


def test_items_whose_key_grew_wait_their_turn() -> None:
    share = {"a": 0.0, "b": 0.5, "c": 0.5}
    queue = LazyQueue(["c", "b", "a"], key=lambda q: share[q], tiebreak=lambda q: q)
    first = queue.pop()
    assert first == "a"
    share["a"] = 0.9
    queue.push("a")
    assert [queue.pop(), queue.pop(), queue.pop()] == ["b", "c", "a"]
    assert not queue


def test_key_growth_while_waiting_is_seen_on_pop() -> None:
    share = {"a": 0.0, "b": 0.1}
    queue = LazyQueue(["a", "b"], key=lambda q: share[q], tiebreak=lambda q: q)
    share["a"] = 1.0
    assert queue.pop() == "b"


def test_a_lone_item_is_never_keyed_until_a_second_arrives() -> None:
    keyed: list[str] = []

    def key(item: str) -> str:
        keyed.append(item)
        return item

    queue = LazyQueue(["b"], key=key, tiebreak=lambda q: q)
    assert queue.peek() == "b" and len(queue) == 1
    assert keyed == []
    queue.push("a")
    assert sorted(keyed) == ["a", "b"]
    assert [queue.pop(), queue.pop()] == ["a", "b"]
    assert not queue and len(queue) == 0


@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=12),
    st.lists(
        st.tuples(st.sampled_from(["peek", "pop", "grow"]), st.integers(0, 11), st.integers(1, 3))
    ),
)
def test_peek_names_what_pop_returns_and_pops_go_by_current_key(
    starts: list[int], steps: list[tuple[str, int, int]]
) -> None:
    # keys only grow while items wait, as shares do; ties break on the item's number
    key = dict(enumerate(starts))
    queue = LazyQueue(list(key), key=lambda item: key[item], tiebreak=lambda item: item)
    waiting = set(key)
    for op, which, by in steps:
        if not waiting:
            break
        smallest = min(waiting, key=lambda item: (key[item], item))
        if op == "grow":
            key[sorted(waiting)[which % len(waiting)]] += by
        elif op == "peek":
            assert queue.peek() == smallest
        else:
            assert queue.pop() == smallest
            waiting.discard(smallest)
    assert len(queue) == len(waiting)
