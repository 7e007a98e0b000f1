"""The ``Dataset`` document: remote data by URL, which jobs read from their node's cache.

As Fluid's Dataset, it names where the data lives (any fsspec URL: ``s3://``,
``gs://``, ``https://`` ...), optionally a sub-path and a secret of its user holding the
credentials; phalanx lists it (size, files, a digest of the listing), and each node
that runs a job naming it keeps one read-only copy in its cache, shared by the jobs
there.

Guarantees of a validated ``DatasetDocument``: ``source`` is a URL of a protocol in
``PROTOCOLS`` with a host (a bucket, a web server) and no credentials, query or
fragment in it; ``path`` is relative, ``/``-separated, without ``.`` or ``..``; the
secret, when named, is a name. What the server reads on a user's behalf is decided
here: never a path on the server's own disk (no ``file://``), never a URL that carries
a password.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from phalanx.spec.common import (
    API_VERSION,
    Duration,
    Metadata,
    Name,
    SpecModel,
    UserName,
    located,
)

#: The protocols a dataset's source may use (fsspec's names): S3 and the web.
PROTOCOLS: Final = ("s3", "http", "https")
#: The longest source URL and sub-path.
MAX_SOURCE: Final = 2048
#: Most nodes ``spec.warm`` names.
MAX_WARM_NODES: Final = 1024


def _source(url: str) -> str:
    if len(url) > MAX_SOURCE:
        raise located(f"the URL is {len(url)} characters long", f"at most {MAX_SOURCE}")
    parts = urlsplit(url)
    if parts.scheme not in PROTOCOLS:
        said = f"{parts.scheme}://" if parts.scheme else "no protocol"
        raise located(
            f"{url[:80]!r} has {said}",
            "give a URL the server and the nodes reach: " + ", ".join(f"{p}://" for p in PROTOCOLS),
        )
    if not parts.netloc:
        raise located(f"{url[:80]!r} names no bucket or host", "give s3://BUCKET/PREFIX")
    if parts.username is not None or parts.password is not None:
        raise located(
            "the URL carries credentials (user@ or user:password@)",
            "remove them from the URL and name a secret holding them (spec.secret)",
        )
    if parts.query or parts.fragment:
        raise located("the URL has a query or a fragment", "give the bucket and prefix only")
    return url


def _relative(path: str) -> str:
    if len(path) > MAX_SOURCE:
        raise located(f"the path is {len(path)} characters long", f"at most {MAX_SOURCE}")
    parts = path.strip("/").split("/") if path.strip("/") else []
    if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise located(
            f"{path[:80]!r} is not a relative path without '.', '..' or '//'",
            "give a path under the source, such as train/images",
        )
    return "/".join(parts)


SourceUrl = Annotated[str, AfterValidator(_source)]
SubPath = Annotated[str, AfterValidator(_relative)]


class DatasetWarm(SpecModel):
    """``spec.warm`` of a Dataset: the nodes that keep a copy of it ahead of the jobs."""

    nodes: Annotated[list[Name], Field(max_length=MAX_WARM_NODES)] = Field(default_factory=list)
    """The nodes whose caches hold it (phalanx get nodes); empty: every node."""


class DatasetSpec(SpecModel):
    """``spec`` of a Dataset: whose it is and where its data lives."""

    user: UserName = "default"
    """The user it belongs to (the API sets it to the caller; an admin may name another).
    Only that user's jobs can read it."""
    source: SourceUrl
    """Where the data lives: an fsspec URL (s3://bucket/prefix, gs://..., https://...);
    the endpoint of an S3-compatible store is the server's and the nodes' setting
    (AWS_ENDPOINT_URL), not the document's."""
    path: SubPath = ""
    """A sub-path under the source: only what is below it is the dataset."""
    secret: Name | None = None
    """A secret of the same user whose keys are the storage options that reach the
    source (for s3://: key, secret and, for temporary credentials, token). Omitted: the
    source is read anonymously (never with the server's or a node's own credentials)."""

    refresh_every: Duration | None = None
    """List the source again this often (30m, 6h, 1d): jobs that start after a listing
    that found new data read the new data. Omitted: listed when created or changed, and
    when asked (phalanx dataset refresh)."""
    warm: DatasetWarm | None = None
    """Keep a copy of the dataset's current listing in the caches of these nodes, copied
    as soon as it is listed (and again if it is evicted), ahead of the jobs that read
    it. Omitted: a node copies it when a job's task there first reads it (phalanx
    dataset warm NAME warms nodes once, on request)."""

    @property
    def url(self) -> str:
        """The source with the sub-path: what is listed and copied."""
        return self.source.rstrip("/") + ("/" + self.path if self.path else "")


class DatasetDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Dataset``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Dataset"] = "Dataset"
    """Always Dataset."""
    metadata: Metadata
    """The dataset's name (unique among its user's datasets); a job's role names it."""
    spec: DatasetSpec
    """Its owner and source."""
