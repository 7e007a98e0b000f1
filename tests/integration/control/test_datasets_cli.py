"""Datasets through the SDK and the ``phalanx`` command line against the real server:
``apply`` creates a Dataset document, then finds it unchanged, then configures it when
it changed (an admin's apply for another user compares that user's); ``get datasets``
and ``describe dataset`` show where the data lives and the last listing; a dataset
naming a secret its user lacks is refused on ``spec.secret``; a dataset is its user's
(another user's describe, refresh and delete answer 404, their listing is empty; an
admin reaches it with ``--user``); ``dataset refresh``, ``dataset warm`` (refused
before a first listing) and ``delete dataset``.

No source here is reachable (``s3://`` without an endpoint): the listing, which the
server does in the background, may still be owed or have failed, so nothing below
depends on its outcome.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from phalanx.client import Client, DatasetView
from phalanx.control.server import Server
from tests.integration.control.serving import Api
from tests.integration.control.test_cli import ok, phalanx, refused

#: What a listing that cannot reach its source shows: owed still, or failed.
UNLISTED = ("Listing", "Failed")

SECRET = """\
apiVersion: phalanx/v1
kind: Secret
metadata: {name: s3}
spec:
  stringData: {key: AKIA-EXAMPLE, secret: not-a-real-one}
"""

DATASET = """\
apiVersion: phalanx/v1
kind: Dataset
metadata: {name: imagenet}
spec:
  source: s3://bucket/prefix
  path: train
  secret: s3
"""


def test_apply_creates_then_finds_unchanged_then_configures(server: Server, tmp_path: Path) -> None:
    alice = Api(server.url, server.admin_token or "").user("alice")
    manifest = tmp_path / "imagenet.yaml"
    manifest.write_text(DATASET + "---\n" + SECRET)  # the secret is sent first all the same
    assert ok(phalanx(server, "apply", "-f", str(manifest), token=alice.token)).splitlines() == [
        "secret/s3 created",
        "dataset/imagenet created",
    ]
    manifest.write_text(DATASET)
    assert ok(phalanx(server, "apply", "-f", str(manifest), token=alice.token)) == (
        "dataset/imagenet unchanged\n"
    )
    # The admin applying it for alice compares alice's, which holds this very document.
    for_alice = DATASET.replace("spec:\n", "spec:\n  user: alice\n")
    assert ok(phalanx(server, "apply", "-f", "-", stdin=for_alice)) == (
        "dataset/imagenet unchanged\n"
    )
    manifest.write_text(DATASET.replace("path: train", "path: val"))
    assert ok(phalanx(server, "apply", "-f", str(manifest), token=alice.token)) == (
        "dataset/imagenet configured\n"
    )
    assert ok(phalanx(server, "apply", "-f", str(manifest), token=alice.token)) == (
        "dataset/imagenet unchanged\n"
    )
    held = json.loads(
        ok(phalanx(server, "get", "dataset", "imagenet", "-o", "json", token=alice.token))
    )
    assert held["document"]["spec"]["path"] == "val" and held["user"] == "alice"


def test_get_and_describe_show_where_the_data_lives(server: Server) -> None:
    alice = Api(server.url, server.admin_token or "").user("alice")
    ok(phalanx(server, "apply", "-f", "-", stdin=SECRET + "---\n" + DATASET, token=alice.token))

    table = ok(phalanx(server, "get", "datasets", token=alice.token)).splitlines()
    assert table[0].split() == ["NAME", "USER", "PHASE", "FILES", "SIZE", "SOURCE", "AGE"]
    [row] = [line.split() for line in table[1:]]
    assert row[:2] == ["imagenet", "alice"] and row[2] in UNLISTED
    assert row[-2] == "s3://bucket/prefix/train"  # SIZE is two words: 0 B
    listed = yaml.safe_load(ok(phalanx(server, "get", "datasets", "-o", "yaml", token=alice.token)))
    assert [(d["name"], d["user"], d["phase"] in UNLISTED) for d in listed] == [
        ("imagenet", "alice", True)
    ]

    described = ok(phalanx(server, "describe", "dataset", "imagenet", token=alice.token))
    fields = {
        key.strip(): value.strip()
        for key, _, value in (line.partition(":") for line in described.splitlines())
    }
    assert fields["Name"] == "imagenet" and fields["User"] == "alice"
    assert fields["Source"] == "s3://bucket/prefix" and fields["Path"] == "train"
    assert fields["Secret"] == "s3"
    assert fields["Phase"] in UNLISTED
    for label in ("Message", "Files", "Size", "Digest", "Listed", "Created", "Updated"):
        assert label in fields, described
    # The admin sees everyone's, and reaches alice's by naming her.
    assert "alice" in ok(phalanx(server, "get", "datasets"))
    by_admin = ok(phalanx(server, "describe", "dataset", "imagenet", "--user", "alice"))
    assert "s3://bucket/prefix" in by_admin


def test_a_dataset_naming_a_secret_its_user_lacks_is_refused(server: Server) -> None:
    alice = Api(server.url, server.admin_token or "").user("alice")
    error = refused(phalanx(server, "apply", "-f", "-", stdin=DATASET, token=alice.token))
    assert "user alice has no secret 's3'" in error and "field: spec.secret" in error
    assert "no datasets" in phalanx(server, "get", "datasets", token=alice.token).stderr


def test_another_user_neither_sees_nor_reaches_it(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    alice, bob = admin.user("alice"), admin.user("bob")
    ok(phalanx(server, "apply", "-f", "-", stdin=SECRET + "---\n" + DATASET, token=alice.token))

    assert "no datasets" in phalanx(server, "get", "datasets", token=bob.token).stderr
    for command in (
        ("describe", "dataset", "imagenet"),
        ("describe", "dataset", "imagenet", "--user", "alice"),
        ("get", "dataset", "imagenet", "--user", "alice"),
        ("dataset", "refresh", "imagenet", "--user", "alice"),
        ("dataset", "warm", "imagenet", "--user", "alice"),
        ("delete", "dataset", "imagenet", "--user", "alice"),
    ):
        assert "no dataset named 'imagenet'" in refused(phalanx(server, *command, token=bob.token))
    assert "imagenet" in ok(phalanx(server, "get", "datasets", token=alice.token))  # still there


def test_refresh_then_delete(server: Server) -> None:
    alice = Api(server.url, server.admin_token or "").user("alice")
    ok(phalanx(server, "apply", "-f", "-", stdin=SECRET + "---\n" + DATASET, token=alice.token))

    refreshed = ok(phalanx(server, "dataset", "refresh", "imagenet", token=alice.token))
    prefix = "dataset/imagenet refresh requested: "
    assert refreshed.startswith(prefix) and refreshed[len(prefix) :].strip() in UNLISTED
    by_admin = ok(phalanx(server, "dataset", "refresh", "imagenet", "--user", "alice"))
    assert by_admin.startswith(prefix)
    assert "no dataset named 'missing'" in refused(
        phalanx(server, "dataset", "refresh", "missing", token=alice.token)
    )
    if phalanx(server, "describe", "dataset", "imagenet", token=alice.token).exit_code == 0:
        never = refused(phalanx(server, "dataset", "warm", "imagenet", token=alice.token))
        assert "was never listed" in never and "fix: wait for its listing" in never, never

    assert ok(phalanx(server, "delete", "dataset", "imagenet", token=alice.token)) == (
        "dataset/imagenet deleted\n"
    )
    assert "no dataset named 'imagenet'" in refused(
        phalanx(server, "describe", "dataset", "imagenet", token=alice.token)
    )
    assert "no dataset named 'imagenet'" in refused(
        phalanx(server, "delete", "dataset", "imagenet", token=alice.token)
    )
    ok(phalanx(server, "apply", "-f", "-", stdin=DATASET, token=alice.token))
    assert ok(phalanx(server, "delete", "datasets", "imagenet", "--user", "alice")) == (
        "dataset/imagenet deleted\n"
    )
    assert "no datasets" in phalanx(server, "get", "datasets", token=alice.token).stderr


def test_the_sdk_applies_reads_refreshes_and_deletes(server: Server) -> None:
    with Client(server.url, server.admin_token) as client:
        applied = client.apply(DATASET.replace("  secret: s3\n", ""))
        assert [(a.kind, a.name, a.action) for a in applied] == [("Dataset", "imagenet", "created")]
        view = applied[0].view
        assert isinstance(view, DatasetView) and view.user == "admin"
        assert view.document["spec"]["source"] == "s3://bucket/prefix"
        assert [(d.user, d.name) for d in client.datasets()] == [("admin", "imagenet")]
        assert client.dataset("imagenet").created_at == view.created_at
        assert client.refresh_dataset("imagenet").phase in UNLISTED
        client.delete_dataset("imagenet")
        assert client.datasets() == []
