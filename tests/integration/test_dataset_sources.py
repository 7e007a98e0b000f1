"""Datasets' sources read for real (``data.source``): a web server's directory (Python's
own ``http.server`` on loopback) and moto's S3 are listed and copied; the same data
lists to the same digest and changed data to another; a file changed between the
listing and the copy is refused, leaving what was copied for the caller to drop; a
link-local web host and a secret key that is no credential are refused."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.data.source import copy_listed, list_source, reach
from phalanx.domain.errors import ContentError, InvalidInput
from tests.integration.s3 import S3


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A directory served over HTTP on loopback: its URL and the directory."""
    root = tmp_path / "served"
    (root / "data" / "sub").mkdir(parents=True)
    (root / "data" / "a.txt").write_bytes(b"alpha")
    (root / "data" / "sub" / "b.txt").write_bytes(b"beta!")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/data/", root / "data"
    server.shutdown()
    server.server_close()


def test_a_web_directory_is_listed_and_copied(web: tuple[str, Path], tmp_path: Path) -> None:
    url, served = web
    fs, root = reach(url, None)
    listing = list_source(fs, root, source=url)
    assert [(path, size) for path, size, _ in listing.files] == [("a.txt", 5), ("sub/b.txt", 5)]
    assert list_source(*reach(url, None), source=url).digest == listing.digest
    copy_listed(fs, root, listing.files, tmp_path / "copy")
    assert (tmp_path / "copy" / "sub" / "b.txt").read_bytes() == b"beta!"

    (served / "a.txt").write_bytes(b"alpha, longer")  # changed since it was listed
    with pytest.raises(ContentError, match="not the 5 it was listed with"):
        copy_listed(*reach(url, None), listing.files, tmp_path / "again")
    assert list_source(*reach(url, None), source=url).digest != listing.digest


def test_a_bucket_is_listed_with_its_credentials_and_copied(
    s3_endpoint: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3fs = pytest.importorskip("s3fs")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    writer = s3fs.S3FileSystem(key="phalanx-test", secret="phalanx-test", skip_instance_cache=True)
    if not writer.exists("phalanx-sources"):
        s3_endpoint.make_bucket("phalanx-sources")
    writer.pipe(
        {"phalanx-sources/set/x.bin": bytes(range(256)) * 5000, "phalanx-sources/set/y": b"y"}
    )
    credentials = {"key": b"phalanx-test", "secret": b"phalanx-test"}
    url = "s3://phalanx-sources/set"
    fs, root = reach(url, credentials)
    listing = list_source(fs, root, source=url)
    assert [(path, size) for path, size, _ in listing.files] == [("x.bin", 1_280_000), ("y", 1)]
    assert all(version for _, _, version in listing.files)  # the ETags
    copy_listed(fs, root, listing.files, tmp_path / "copy")
    assert (tmp_path / "copy" / "x.bin").read_bytes() == bytes(range(256)) * 5000
    writer.pipe({"phalanx-sources/set/y": b"z"})  # same size, new content: a new ETag
    assert list_source(*reach(url, credentials), source=url).digest != listing.digest


def test_what_a_dataset_must_not_reach_is_refused() -> None:
    with pytest.raises(InvalidInput, match="link-local"):
        reach("http://169.254.169.254/latest/meta-data/", None)
    with pytest.raises(InvalidInput, match="'endpoint_url' is not a credential of s3://"):
        reach("s3://bucket/x", {"endpoint_url": b"http://169.254.169.254", "key": b"k"})
    with pytest.raises(InvalidInput, match="takes: none"):
        reach("https://example.org/data", {"token": b"t"})
