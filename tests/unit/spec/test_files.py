"""load_file: reading from disk with the same guarantees as load_documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.spec import MAX_INPUT_SIZE, JobDocument, load_file
from tests.unit.spec.examples import MINIMAL_JOB


def test_a_file_loads_and_names_itself_in_errors(tmp_path: Path) -> None:
    good = tmp_path / "job.yaml"
    good.write_text(MINIMAL_JOB, encoding="utf-8-sig")  # a byte-order mark is tolerated
    (document,) = load_file(good)
    assert isinstance(document, JobDocument)
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL_JOB.replace("replicas: 1", "replicas: 0"))
    with pytest.raises(
        DocumentError, match=r"bad\.yaml document 1 \(Job bert\): spec\.roles\[0\]\.replicas"
    ):
        load_file(str(bad))


def test_a_missing_file_is_a_document_error(tmp_path: Path) -> None:
    with pytest.raises(
        DocumentError, match="cannot read: No such file or directory; fix: check the path"
    ):
        load_file(tmp_path / "absent.yaml")


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(DocumentError, match="byte 9 is not UTF-8; fix: save the file as UTF-8"):
        load_file(path)


def test_a_huge_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_bytes(b"#" * (MAX_INPUT_SIZE + 1))
    with pytest.raises(DocumentError, match="over the 10485760-byte limit"):
        load_file(path)
