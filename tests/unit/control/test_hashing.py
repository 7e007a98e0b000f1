"""Content hashes off the workflow controller: asking never waits, answers come all at
once per asker, and no asker is handed a digest made for another."""

from __future__ import annotations

import threading

import pytest

from phalanx.control.controllers import hashing
from phalanx.control.controllers.hashing import Hashes, NotYetHashed
from phalanx.workflow.contents import SERVER, MissingContent

#: Seconds a worker may take for a hash (a guard against a hang only: a busy machine is slow).
SOON = 60


class Gate:
    """A content hash that waits until the test lets it through, and counts calls."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.calls: list[str] = []

    def __call__(self, url: str, _access: object) -> str:
        self.calls.append(url)
        self.open.wait(10)
        if url.endswith("missing"):
            raise MissingContent(f"{url} does not exist")
        return f"sha256:{url}"


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Gate:
    made = Gate()
    monkeypatch.setattr(hashing, "content_hash", made)
    return made


def test_asking_never_waits_and_the_answers_come_together(gate: Gate) -> None:
    done = threading.Semaphore(0)
    hashes = Hashes(done.release)
    try:
        with pytest.raises(NotYetHashed):
            hashes.batch("r1/a/key", ["/x/a", "/x/b"], SERVER)  # the hash is blocked: at once
        with pytest.raises(NotYetHashed):
            hashes.batch("r1/a/key", ["/x/a", "/x/b"], SERVER)  # asked again: queued once
        gate.open.set()
        assert done.acquire(timeout=SOON) and done.acquire(timeout=SOON)
        assert hashes.batch("r1/a/key", ["/x/a", "/x/b"], SERVER) == {
            "/x/a": "sha256:/x/a",
            "/x/b": "sha256:/x/b",
        }
        assert sorted(gate.calls) == ["/x/a", "/x/b"]
        # Handed over, then forgotten: the same question hashes anew.
        with pytest.raises(NotYetHashed):
            hashes.batch("r1/a/key", ["/x/a"], SERVER)
        assert done.acquire(timeout=SOON)  # (done before the next test's gate is set)
    finally:
        hashes.close()


def test_an_answer_is_never_given_to_another_asker(gate: Gate) -> None:
    gate.open.set()
    done = threading.Semaphore(0)
    hashes = Hashes(done.release)
    try:
        with pytest.raises(NotYetHashed):
            hashes.batch("r1/a/key", ["/x/a"], SERVER)
        assert done.acquire(timeout=SOON)
        with pytest.raises(NotYetHashed):  # r2 asks for the same file: hashed for r2
            hashes.batch("r2/a/key", ["/x/a"], SERVER)
        assert done.acquire(timeout=SOON)
        assert hashes.batch("r2/a/key", ["/x/a"], SERVER) == {"/x/a": "sha256:/x/a"}
        assert gate.calls == ["/x/a", "/x/a"]
    finally:
        hashes.close()


def test_a_failed_hash_is_the_askers_error(gate: Gate) -> None:
    gate.open.set()
    done = threading.Semaphore(0)
    hashes = Hashes(done.release)
    try:
        with pytest.raises(NotYetHashed):
            hashes.batch("r1/a/key", ["/x/a", "/x/missing"], SERVER)
        assert done.acquire(timeout=SOON) and done.acquire(timeout=SOON)
        with pytest.raises(MissingContent, match="/x/missing does not exist"):
            hashes.batch("r1/a/key", ["/x/a", "/x/missing"], SERVER)
    finally:
        hashes.close()


def test_nothing_to_hash_is_answered_at_once() -> None:
    hashes = Hashes(lambda: None)
    try:
        assert hashes.batch("r1/a/key", [], SERVER) == {}
    finally:
        hashes.close()


def test_uncollected_answers_are_dropped_after_a_while(gate: Gate) -> None:
    gate.open.set()
    now = [0.0]
    done = threading.Semaphore(0)
    hashes = Hashes(done.release, clock=lambda: now[0])
    try:
        with pytest.raises(NotYetHashed):
            hashes.batch("r1/a/key", ["/x/a"], SERVER)
        assert done.acquire(timeout=SOON)
        now[0] = hashing.KEEP_SECONDS + 1
        with pytest.raises(NotYetHashed):  # the old answer is gone: hashed again
            hashes.batch("r1/a/key", ["/x/a"], SERVER)
        assert done.acquire(timeout=SOON)  # (done before the next test's gate is set)
    finally:
        hashes.close()
