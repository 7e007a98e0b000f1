"""``DatasetInputs`` over a real SQLite store: a job's pin outlives a new listing of its
dataset (the listing is kept by digest while a live job names it), a digest is bound to
its source (a listing of another source is never copied as the dataset's), and what a
Ray node copies for a task carries the dataset's credentials, never in its repr."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.control.controllers.data_inputs import DatasetInputs
from phalanx.control.store import datasets as stored
from phalanx.control.store.database import Database, sqlite_url
from phalanx.data.source import listing_digest
from phalanx.domain.errors import InvalidInput

SOURCE = "s3://bucket/mnist"
FIRST = (("a.txt", 5, "e1"), ("sub/b.txt", 5, "e2"))
SECOND = (("a.txt", 5, "e3"), ("sub/b.txt", 5, "e2"))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.open(sqlite_url(tmp_path))
    yield database
    database.close()


def put(
    db: Database, user: str, name: str, source: str, files: tuple[tuple[str, int, str], ...]
) -> str:
    """``user``'s dataset ``name`` at ``source``, listed as ``files``; its digest."""
    document = {
        "apiVersion": "phalanx/v1",
        "kind": "Dataset",
        "metadata": {"name": name},
        "spec": {"user": user, "source": source, "secret": "s3"},
    }
    digest = listing_digest(source, files)
    with db.write() as session:
        stored.put(session, user, name, document, now=time.time())
        row = stored.get(session, user, name)
        assert row is not None
        asked = row.wanted
        assert stored.record_listing(
            session, user, name, asked=asked, files=files, digest=digest, now=time.time()
        )
    return digest


def credentials(user: str, name: str) -> dict[str, bytes] | None:
    return {"key": b"AKIA-" + user.encode(), "secret": b"s3cr3t-value"} if name == "s3" else None


def test_a_pin_outlives_a_new_listing_until_no_live_job_names_it(db: Database) -> None:
    inputs = DatasetInputs(None, credentials)
    first = put(db, "alice", "mnist", SOURCE, FIRST)
    second = put(db, "alice", "mnist", SOURCE, SECOND)  # listed again: new data
    assert first != second
    with db.session() as session:
        read = inputs.read(session, "alice", [("mnist", first), ("mnist", None)])
        (copy,) = inputs.for_task(session, "alice", [("mnist", first)])
        current = inputs.read(session, "alice", [("mnist", None)])
    assert read is not None and current is not None
    assert [d.copy.digest for d in read[0]] == [first]  # the first pin of the name
    assert [d.copy.digest for d in current[0]] == [second]
    assert copy.files == FIRST and copy.size == 10 and copy.url == SOURCE
    assert copy.credentials == {"key": b"AKIA-alice", "secret": b"s3cr3t-value"}
    assert "s3cr3t" not in repr(copy) and "AKIA" not in repr(copy)

    reader = {"spec": {"roles": [{"datasets": [f"mnist@{first}"]}]}}
    with db.write() as session:  # a live job pinned to the first listing keeps it
        assert stored.collect_listings(session, inputs.keep([reader])) == 0
    with db.write() as session:  # once none does, only the current one is kept
        assert stored.collect_listings(session, inputs.keep([])) == 1
    with db.session() as session:
        assert stored.listed_files(session, first) is None
        assert stored.listed_files(session, second) == SECOND
        with pytest.raises(InvalidInput, match="is not kept"):
            inputs.for_task(session, "alice", [("mnist", first)])


def test_a_listing_of_another_source_is_never_the_datasets(db: Database) -> None:
    inputs = DatasetInputs(None, credentials)
    hers = put(db, "alice", "mnist", SOURCE, FIRST)
    put(db, "bob", "mnist", "s3://bucket/bob", FIRST)  # the same files, elsewhere
    with db.session() as session:
        read = inputs.read(session, "bob", [("mnist", hers)])
        assert read is not None
        (problem,) = read[1]
        assert f"listing {hers} is not of its source s3://bucket/bob" in problem
        with pytest.raises(InvalidInput, match="is not of its source"):
            inputs.for_task(session, "bob", [("mnist", hers)])
