"""A model version's manifest: canonical bytes, a stable digest, and every corruption
refused with ``ManifestError``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import ContentError
from phalanx.models.manifest import FileEntry, Manifest, ManifestError

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "0123456789abcdef" * 4


def make_entry(
    *, path: str = "weights.bin", digest: str = DIGEST_A, size: int = 3, executable: bool = False
) -> FileEntry:
    return FileEntry(path=path, digest=digest, size=size, executable=executable)


def make_manifest() -> Manifest:
    return Manifest.of(
        [
            make_entry(path="tokenizer/vocab.txt", digest=DIGEST_B, size=10),
            make_entry(path="run.sh", executable=True),
            make_entry(),
        ]
    )


_names = st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1, max_size=8)
_paths = st.lists(_names.filter(lambda n: n not in (".", "..")), min_size=1, max_size=3).map(
    lambda parts: "leaf-" + "/".join(parts)  # "leaf-": no file is another's directory
)
_entries = st.builds(
    FileEntry,
    path=_paths,
    digest=st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: f"sha256:{h}"),
    size=st.integers(min_value=0, max_value=1 << 40),
    executable=st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_entries, max_size=8, unique_by=lambda entry: entry.path), st.randoms())
def test_a_manifest_round_trips_and_its_digest_ignores_input_order(
    entries: list[FileEntry], random: Any
) -> None:
    manifest = Manifest.of(entries)
    assert Manifest.from_json(manifest.to_json()) == manifest
    random.shuffle(entries)
    shuffled = Manifest.of(entries)
    assert shuffled.to_json() == manifest.to_json()
    assert shuffled.digest == manifest.digest
    assert manifest.size == sum(entry.size for entry in entries)


def test_the_digest_is_stable_across_runs() -> None:
    # Pinned: a change of the canonical form renames every stored version.
    manifest = make_manifest()
    assert manifest.to_json().startswith(b'{"files":[{"digest":"sha256:aaaa')
    assert b" " not in manifest.to_json()
    assert [entry.path for entry in manifest.files] == [
        "run.sh",
        "tokenizer/vocab.txt",
        "weights.bin",
    ]
    assert manifest.digest == (
        "sha256:cc00487515bd24a125df9b58d713b633ea65e9de348712f69ec47de0b9ea8bf1"
    )
    assert manifest.size == 16


def _corrupt(edit: Any) -> bytes:
    document = json.loads(make_manifest().to_json())
    edit(document)
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _set(index: int, key: str, value: object) -> Any:
    return lambda document: document["files"][index].__setitem__(key, value)


CORRUPTIONS: dict[str, bytes] = {
    "not json": b"{not json",
    "not utf-8": b'{"files":[],"version":1}\xff',
    "not an object": b"[]",
    "extra field": _corrupt(lambda d: d.__setitem__("extra", 1)),
    "no files": _corrupt(lambda d: d.pop("files")),
    "files not a list": _corrupt(lambda d: d.__setitem__("files", {})),
    "other version": _corrupt(lambda d: d.__setitem__("version", 2)),
    "version as bool": _corrupt(lambda d: d.__setitem__("version", True)),
    "entry not an object": _corrupt(lambda d: d["files"].__setitem__(0, "run.sh")),
    "entry extra field": _corrupt(_set(0, "mode", 420)),
    "entry missing field": _corrupt(lambda d: d["files"][0].pop("size")),
    "path absolute": _corrupt(_set(0, "path", "/etc/passwd")),
    "path up": _corrupt(_set(2, "path", "../../x")),
    "path up inside": _corrupt(_set(2, "path", "z/../../x")),
    "path dot": _corrupt(_set(2, "path", "z/./x")),
    "path empty part": _corrupt(_set(2, "path", "z//x")),
    "path trailing slash": _corrupt(_set(2, "path", "z/")),
    "path empty": _corrupt(_set(0, "path", "")),
    "path nul": _corrupt(_set(2, "path", "z\0")),
    "path not a string": _corrupt(_set(0, "path", 7)),
    "digest short": _corrupt(_set(0, "digest", "sha256:abc")),
    "digest upper": _corrupt(_set(0, "digest", "sha256:" + "A" * 64)),
    "digest other algorithm": _corrupt(_set(0, "digest", "md5:" + "a" * 64)),
    "size negative": _corrupt(_set(0, "size", -1)),
    "size float": _corrupt(_set(0, "size", 1.5)),
    "size bool": _corrupt(_set(0, "size", True)),
    "size string": _corrupt(_set(0, "size", "3")),
    "executable int": _corrupt(_set(0, "executable", 1)),
    "unsorted": _corrupt(lambda d: d["files"].reverse()),
    "duplicate": _corrupt(lambda d: d["files"].append(d["files"][-1])),
    "file and directory": _corrupt(_set(0, "path", "tokenizer")),
    "spaces": make_manifest().to_json().replace(b",", b", "),
    "keys unsorted": make_manifest()
    .to_json()
    .replace(b'{"files":', b'{"version":1,"files":')[: -len(b',"version":1}')]
    + b"}",
}


@pytest.mark.parametrize("data", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_every_corruption_is_refused_with_a_manifest_error(data: bytes) -> None:
    with pytest.raises(ManifestError) as caught:
        Manifest.from_json(data)
    assert isinstance(caught.value, ContentError)
    assert str(caught.value)


def test_the_canonical_bytes_are_accepted_again() -> None:
    data = make_manifest().to_json()
    assert Manifest.from_json(data).to_json() == data


def test_an_entry_is_checked_when_made() -> None:
    with pytest.raises(ManifestError, match="does not stay inside the model"):
        make_entry(path="a/../../b")
    with pytest.raises(ManifestError, match="is there twice"):
        Manifest.of([make_entry(), make_entry()])
    with pytest.raises(ManifestError, match="comes after"):
        Manifest(files=(make_entry(path="b"), make_entry(path="a")))
