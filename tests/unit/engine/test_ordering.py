"""LazyQueue pops by current key, breaking ties on the stable key."""

from __future__ import annotations

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
