"""The store's model versions: numbered from 1 per name and never given twice (a deleted
version keeps its row), the newest of each listed per owner, a name its first user's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.control.store import model_versions as stored
from phalanx.control.store.database import Database, sqlite_url


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    opened = Database.open(sqlite_url(tmp_path))
    yield opened
    opened.close()


def new(name: str, user: str = "alice", digest: str = "sha256:" + "a" * 64) -> stored.NewVersion:
    return stored.NewVersion(
        name=name,
        digest=digest,
        size=7,
        files=1,
        user=user,
        job="fit",
        role="trainer",
        run_id=None,
        step=None,
        lineage={"command": ["train"]},
    )


def test_versions_count_up_and_a_deleted_number_is_never_given_again(db: Database) -> None:
    with db.write() as session:
        assert [stored.add(session, new("mnist"), now=1.0) for _ in range(3)] == [1, 2, 3]
        assert stored.add(session, new("other"), now=1.0) == 1
    with db.write() as session:
        assert stored.delete(session, "mnist", 3, now=2.0) == [3]
    with db.write() as session:
        assert [row.version for row in stored.versions(session, "mnist")] == [2, 1]
        assert stored.add(session, new("mnist"), now=3.0) == 4
        assert stored.delete(session, "mnist", None, now=4.0) == [4, 2, 1]
    with db.session() as session:
        assert stored.versions(session, "mnist") == []
        assert stored.version(session, "mnist", None) is None
        # the name stays alice's, though every version is gone
        assert stored.owners(session, ["mnist", "other", "none"]) == {
            "mnist": "alice",
            "other": "alice",
        }


def test_the_newest_of_each_model_is_listed_per_owner(db: Database) -> None:
    with db.write() as session:
        stored.add(session, new("b", digest="sha256:" + "b" * 64), now=1.0)
        stored.add(session, new("b", digest="sha256:" + "c" * 64), now=2.0)
        stored.add(session, new("a", user="bob"), now=3.0)
        stored.delete(session, "b", 2, now=4.0)
    with db.session() as session:
        assert [(r.name, r.version) for r in stored.latest(session, None)] == [("a", 1), ("b", 1)]
        assert [r.name for r in stored.latest(session, "bob")] == ["a"]
        assert stored.counts(session) == {"a": 1, "b": 1}
        newest = stored.version(session, "b", None)
        assert newest is not None and newest.version == 1
        # only versions not deleted keep their content in the store
        assert stored.kept_digests(session) == {"sha256:" + "a" * 64, "sha256:" + "b" * 64}
